# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The mail outage banner (issue 26 item 5): while reminders wait out a mail outage, every page says since when
the server refuses, how many reminders wait, the next try and its last answer; it comes from the reminder app's
part of the dashboard (oncebeat.web.reminders registers it) and goes away once the reminders are sent."""

from __future__ import annotations

import html
import re
import socket
from collections.abc import Callable
from datetime import timedelta

from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.clock import ClockProcess
from oncebeat.mail import Mailer
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.outage import mail_outage
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.runtime import Runtime
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.timebase import SimulatedClock, SystemClock
from oncebeat.worker import Worker

PAGES = ("/", "/schedules", "/jobs", "/queues", "/effects", "/reminders", "/schedules/reminders")


def _banner(page: str) -> str | None:
    match = re.search(r'<p class="banner" role="alert">(.*?)</p>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))) if match else None


def test_every_page_shows_the_mail_outage_until_the_reminders_go_out(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    with socket.socket() as s:  # a port nothing listens on: the mail server is down (connection refused)
        s.bind(("127.0.0.1", 0))
        down = s.getsockname()[1]
    clock = SystemClock()
    client = dashboard_client()
    assert all(_banner(client.get(p).text) is None for p in PAGES)  # no outage: no banner
    mailer = Mailer(f"smtp://127.0.0.1:{down}")
    try:
        service = ReminderService(runtime.store, Policy(), clock=clock, mailer=mailer)
        app = build_app(service)
        today = clock.now().date()
        service.upsert([Customer(email=f"c{i}@example.com", name=f"C{i}") for i in range(3)],
                       [Invoice(number=f"INV-{i}", customer_email=f"c{i}@example.com", currency="USD",
                                amount_due=100, issued_on=today - timedelta(days=40),
                                due_on=today - timedelta(days=3)) for i in range(3)])
        ClockProcess(app, runtime.store, clock=clock).trigger("reminders")
        Worker(app, runtime.store, clock=clock).drain()
    finally:
        mailer.close()
    outage = mail_outage(runtime.store)
    assert outage is not None and outage.waiting == 3 and outage.next_try_at is not None
    assert outage.next_try_at > outage.since and "Connection refused" in outage.last_reason
    for path in PAGES:
        banner = _banner(client.get(path).text)
        assert banner is not None, path
        assert banner.startswith("Mail server refusing since ") and "3 reminders waiting" in banner, banner
        assert "next try " in banner and "(in " in banner and "Last answer:" in banner, banner
        assert "." not in banner.split("since ", 1)[1][:20]  # whole seconds: no microseconds on screen
    assert _banner(dashboard_client(role=None).get("/login").text) is None  # nothing before a login
    # The send jobs' pages say they wait, not that they failed, and count no attempt for the refusals.
    sends = [j for j in runtime.store.read("list_jobs_page", state="retryable", task="reminders.send", queue=None,
                                           since=None, until=None, before_id=None, limit=10)]
    assert len(sends) == 3
    job_page = client.get(f"/jobs/{sends[0]['id']}").text
    assert '<span class="badge paused">waiting</span></h1>' in job_page
    assert "Waiting, not failed: mail outage (since " in html.unescape(job_page)
    max_attempts = int(sends[0]["max_attempts"]) - 1  # a snooze grows max_attempts by one
    assert f"<dd>0 of {max_attempts} used <span" in job_page and "1 try that used none: snoozed" in job_page
    assert "retryable</span></h1>" not in job_page

    # The server answers again: the sends go out and the banner is gone.
    from aiosmtpd.controller import Controller

    class Sink:
        async def handle_DATA(self, server: object, session: object, envelope: object) -> str:  # noqa: N802
            return "250 OK"

    controller = Controller(Sink(), hostname="127.0.0.1", port=down)
    controller.start()
    mailer = Mailer(f"smtp://127.0.0.1:{down}")
    try:
        service = ReminderService(runtime.store, Policy(), clock=clock, mailer=mailer)
        later = SimulatedClock(clock.now() + timedelta(hours=1))  # the snoozed sends' next try has come
        Worker(build_app(service), runtime.store, clock=later).drain()
    finally:
        mailer.close()
        controller.stop()
    assert {r["state"] for r in runtime.store.read("list_reminders")} == {"sent"}
    assert mail_outage(runtime.store) is None
    assert _banner(client.get("/").text) is None

