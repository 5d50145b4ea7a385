# ruff: noqa: F811  (fixtures imported from test_browser are redefined as test arguments, as pytest intends)
"""The invoice page shows the grouped notice a stage went out in (issue 24 item 1): its id, state, Message-ID and
the other invoices it carried, each a link; behind the login. A real ``oncebeat web`` process in Debian's
Chromium (Playwright), on a database of each backend where a real send (aiosmtpd) grouped three invoices."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from test_browser import TOKEN, Live, _log_in, browser, console_errors, page  # noqa: F401
from web_helpers import serve_web

from oncebeat.clock import ClockProcess
from oncebeat.mail import Mailer, MailSink
from oncebeat.reminders.bulk import BulkOptions
from oncebeat.reminders.policy import load_policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

pytestmark = pytest.mark.slow

CONFIG = """[reminders]
stages = [1, 7, 14, 30]
group = "customer"
"""


@pytest.fixture
def grouped(store: Store, db_url: str, sim_clock: SimulatedClock, tmp_path: Path) -> Iterator[Live]:
    """Three invoices of one customer sent as one notice, then a real ``oncebeat web`` on that database."""
    config = tmp_path / "oncebeat.toml"
    config.write_text(CONFIG)
    policy = load_policy(config)
    today = sim_clock.now().date()
    due = today - timedelta(days=2)
    csv = tmp_path / "book.csv"
    csv.write_text("invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"
                   + "".join(f"G-{n},ana@example.com,Ana Müller,EUR,{n}00.00,{due - timedelta(days=30)},{due}\n"
                             for n in (1, 2, 3)))
    sink = MailSink(tmp_path / "maildir").start()
    mailer = Mailer(sink.url)
    try:
        service = ReminderService(store, policy, clock=sim_clock, mailer=mailer)
        service.import_invoices_csv(csv, BulkOptions(today=today))
        app = build_app(service)
        clock = ClockProcess(app, store, clock=sim_clock)
        clock.start()
        sim_clock.set(app.schedules["reminders"].schedule().next_after(sim_clock.now()))
        clock.tick()
        Worker(app, store, clock=sim_clock).drain()
    finally:
        mailer.close()
        sink.stop()
    with serve_web(db_url, config, tmp_path, ONCEBEAT_WEB_TOKEN=TOKEN) as url:
        yield Live(url=url, db_url=db_url, seeded=None)  # type: ignore[arg-type]


def test_the_invoice_page_names_the_notice_and_the_invoices_it_carried(grouped: Live, page: object,
                                                                      console_errors: list[str]) -> None:
    pg = page
    pg.goto(grouped.url + "/reminders/invoices/G-2")  # type: ignore[attr-defined]
    assert "/login" in pg.url  # type: ignore[attr-defined]
    _log_in(pg, grouped, TOKEN)
    pg.goto(grouped.url + "/reminders/invoices/G-2")  # type: ignore[attr-defined]
    notice = pg.inner_text("dd.notice")  # type: ignore[attr-defined]
    assert "grouped notice 1" in notice and "sent" in notice and "Message-ID <notice-" in notice
    assert "one email with: G-1 stage 1, G-3 stage 1" in notice and "G-2 stage" not in notice
    folder = os.environ.get("ONCEBEAT_SCREENSHOTS")
    if folder:
        pg.locator("dd.notice").scroll_into_view_if_needed()  # type: ignore[attr-defined]
        pg.screenshot(path=str(Path(folder) / "dashboard-invoice-notice.png"), full_page=True)  # type: ignore[attr-defined]
    pg.click("dd.notice a:text-is('G-3')")  # type: ignore[attr-defined]
    assert pg.inner_text("h1").startswith("Invoice G-3")  # type: ignore[attr-defined]
    assert "one email with: G-1 stage 1, G-2 stage 1" in pg.inner_text("dd.notice")  # type: ignore[attr-defined]
    assert console_errors == []
