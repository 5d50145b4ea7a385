# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The payment-freshness banner (issue 23 item 5): with [reminders] max_payment_staleness set, every page says
how old the freshest payment data is, from which source, and how many reminders wait; it goes away once the data
is fresh again."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from web_helpers import LOOPBACK_CLIENT, TOKEN, VIEWER_TOKEN, login

from oncebeat.clock import ClockProcess
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.timebase import SimulatedClock
from oncebeat.web.app import WebSettings, create_app
from oncebeat.worker import Worker

PAGES = ("/", "/jobs", "/reminders")


@pytest.fixture
def fenced(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    config = tmp_path / "oncebeat.toml"
    config.write_text('[reminders]\nmax_payment_staleness = "6h"\n', encoding="utf-8")
    rt = load_runtime(database_url=db_url, config=config)
    try:
        yield rt
    finally:
        rt.close()


def _banner(page: str) -> str | None:
    match = re.search(r'<p class="banner" role="alert">(.*?)</p>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))) if match else None


def test_every_page_says_why_reminders_wait_for_fresh_payment_data(fenced: Runtime) -> None:
    rt = fenced
    app = create_app(WebSettings(token=TOKEN, viewer_token=VIEWER_TOKEN), runtime=rt)
    with TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False, client=LOOPBACK_CLIENT) as client:
        login(client, VIEWER_TOKEN)
        now = rt.clock.now()
        service = ReminderService(rt.store, rt.policy, clock=SimulatedClock(now - timedelta(hours=9)))
        today = now.date()
        service.upsert([Customer(email="c@example.com", name="C")],  # the last refresh: 9 hours ago (API)
                       [Invoice(number="INV-1", customer_email="c@example.com", currency="USD", amount_due=100,
                                issued_on=today - timedelta(days=40), due_on=today - timedelta(days=3))])
        worker_clock = SimulatedClock(now)
        app_ = build_app(ReminderService(rt.store, rt.policy, clock=worker_clock))
        ClockProcess(app_, rt.store, clock=worker_clock).trigger("reminders")
        Worker(app_, rt.store, clock=worker_clock).drain()  # the send waits (no mailer needed: it never sends)
        for path in PAGES:
            banner = _banner(client.get(path).text)
            assert banner is not None, path
            assert banner.startswith("Reminders waiting for fresh payment data: payment data last refreshed 9h"), banner
            assert "ago by API import; reminders wait until it is fresher than 6h (1 reminder waiting" in banner, banner
        # A fresh (empty) payments import through the API: the banner is gone.
        ReminderService(rt.store, rt.policy, clock=rt.clock).apply_payments([])
        assert _banner(client.get("/").text) is None
