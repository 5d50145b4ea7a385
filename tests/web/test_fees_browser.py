# ruff: noqa: F811  (fixtures imported from test_browser are redefined as test arguments, as pytest intends)
"""The late fees on the Reports page in a real browser (Debian's Chromium via Playwright) against a real
``oncebeat web`` on each backend: fees recorded by real sends through the aiosmtpd sink (issue 24.4)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from test_browser import TOKEN, VIEWER_TOKEN, browser, console_errors, page  # noqa: F401
from web_helpers import serve_web

from oncebeat.clock import ClockProcess
from oncebeat.mail import Mailer, MailSink
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import load_runtime
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

pytestmark = pytest.mark.slow

POLICY = """[schedule]
tz = "Europe/Berlin"

[reminders]
stages = [7, 30]
collapse = "highest"

[stage.7]
fee = { fixed = 2500 }

[stage.30]
cc = ["owner@example.com"]
fee = { percent = 1.5, cap = 5000 }
"""


@pytest.fixture
def fees_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A real ``oncebeat web`` on a book whose notices went out with fees (simulated time: March 2026)."""
    config = tmp_path / "oncebeat.toml"
    config.write_text(POLICY, encoding="utf-8")
    rt = load_runtime(database_url=db_url, config=config)
    sink = MailSink(tmp_path / "maildir").start()
    mailer = Mailer(sink.url)
    try:
        clock = SimulatedClock(rt.clock.now().replace(year=2026, month=3, day=10, hour=12))
        service = ReminderService(rt.store, rt.policy, clock=clock, mailer=mailer)
        today = clock.now().date()
        invoices = [("F-1", "EUR", 123_456, 40), ("F-2", "EUR", 1_000_000, 40), ("F-3", "USD", 9_900, 8)]
        service.upsert([Customer(email=f"{n.lower()}@example.com", name=f"Kunde {n}", locale="de_DE")
                        for n, *_ in invoices],
                       [Invoice(number=n, customer_email=f"{n.lower()}@example.com", currency=c, amount_due=a,
                                issued_on=today - timedelta(days=d + 30), due_on=today - timedelta(days=d))
                        for n, c, a, d in invoices])
        app = build_app(service)
        clk = ClockProcess(app, rt.store, clock=clock)
        clk.start()
        clock.set(app.schedules["reminders"].schedule().next_after(clock.now()))
        clk.tick()
        Worker(app, rt.store, clock=clock).drain()
    finally:
        mailer.close()
        sink.stop()
        rt.close()
    with serve_web(db_url, config, tmp_path, ONCEBEAT_WEB_TOKEN=TOKEN, ONCEBEAT_WEB_VIEWER_TOKEN=VIEWER_TOKEN) as url:
        yield url


def test_a_viewer_reads_each_late_fee_and_the_totals_per_currency(fees_url: str, page: object,
                                                                    console_errors: list[str]) -> None:
    pg: object = page
    pg.goto(fees_url + "/reports?from=2026-01&to=2026-04")  # type: ignore[attr-defined]
    assert "/login" in pg.url  # type: ignore[attr-defined]  # login needed
    pg.fill("input[name=token]", VIEWER_TOKEN)  # type: ignore[attr-defined]
    pg.click("form.card button[type=submit]")  # type: ignore[attr-defined]
    pg.goto(fees_url + "/reports?from=2026-01&to=2026-04")  # type: ignore[attr-defined]
    card = pg.locator(".report-fees")  # type: ignore[attr-defined]
    rows = card.locator("table tr")
    assert rows.count() == 4  # a header and one row per fee
    text = card.inner_text()
    for part in ("F-1", "F-2", "F-3", "Kunde F-1", "€18.52", "€50.00", "$25.00", "1.5 % (cap 5000)", "fixed 2500",
                 "EUR: 2 fee(s), 6852 minor units in total.", "USD: 1 fee(s), 2500 minor units in total.",
                 "oncebeat report fees --csv"):
        assert part in text.replace("\u00a0", " "), (part, text)
    assert not console_errors  # the CSP holds: no inline style or script was refused
