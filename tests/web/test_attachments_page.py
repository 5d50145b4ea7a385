# ruff: noqa: F811  (fixtures imported from test_browser are redefined as test arguments, as pytest intends)
"""The invoice page lists the files each sent reminder carried (name, size, SHA-256) and a logged-in operator
downloads exactly the bytes sent; an anonymous request gets no byte of them. A real ``oncebeat web`` process in
Debian's Chromium (Playwright), on a database of each backend where a real send (aiosmtpd) froze the files.

Set ``ONCEBEAT_SCREENSHOTS=docs/img`` to save the page's screenshot (docs/attachments.md)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import urllib.error
import urllib.request
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
collapse = "highest"

[attachments]
invoice_pdf = true
pdf_dir = "pdf"
statement = "final"
"""
PDF = b"%PDF-1.4\n% the invoice INV-A1 as the billing system printed it\n%%EOF\n"


@pytest.fixture
def sent(store: Store, db_url: str, sim_clock: SimulatedClock, tmp_path: Path) -> Iterator[Live]:
    """One reminder of INV-A1 sent with its PDF and a statement, then a real ``oncebeat web`` on that database."""
    config = tmp_path / "oncebeat.toml"
    config.write_text(CONFIG)
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "INV-A1.pdf").write_bytes(PDF)
    policy = load_policy(config)
    today = sim_clock.now().date()
    due = today - timedelta(days=40)
    csv = tmp_path / "book.csv"
    csv.write_text("invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"
                   f"INV-A1,ana@example.com,Ana Müller,EUR,1250.00,{due - timedelta(days=30)},{due}\n"
                   f"INV-A2,ana@example.com,Ana Müller,USD,80.00,{today - timedelta(days=20)},"
                   f"{today + timedelta(days=10)}\n")
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


def _anonymous(url: str) -> tuple[int, bytes]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_invoice_page_lists_and_downloads_the_files_a_reminder_carried(sent: Live, page: object,
                                                                           tmp_path: Path) -> None:
    pg = page
    status, body = _anonymous(sent.url + "/reminders/1/attachments/0")
    assert status in (302, 303, 401, 403) and b"%PDF" not in body and b"INV-A1" not in body  # no byte without login
    _log_in(pg, sent, TOKEN)
    pg.goto(sent.url + "/reminders/invoices/INV-A1")  # type: ignore[attr-defined]
    text = pg.inner_text("main")  # type: ignore[attr-defined]
    assert "INV-A1.pdf" in text and f"{len(PDF)} bytes" in text and hashlib.sha256(PDF).hexdigest() in text
    assert "statement-" in text
    assert text.count("INV-A1.pdf") == 1  # on the stage sent only, not on the lower stages it superseded
    folder = os.environ.get("ONCEBEAT_SCREENSHOTS")
    if folder:
        pg.locator("div.attachment").first.scroll_into_view_if_needed()  # type: ignore[attr-defined]
        pg.screenshot(path=str(Path(folder) / "dashboard-invoice-attachments.png"), full_page=True)  # type: ignore[attr-defined]
    with pg.expect_download() as info:  # type: ignore[attr-defined]
        pg.click("a:text('INV-A1.pdf')")  # type: ignore[attr-defined]
    download = info.value
    assert download.suggested_filename == "INV-A1.pdf"
    assert Path(download.path()).read_bytes() == PDF  # the bytes sent, as the file was
    with pg.expect_download() as info:  # type: ignore[attr-defined]
        pg.click("a:text('statement-')")  # type: ignore[attr-defined]
    statement = Path(info.value.path()).read_bytes()
    assert statement.startswith(b"%PDF-") and hashlib.sha256(statement).hexdigest() in text
    if folder:  # the statement itself, as a picture (poppler's pdftoppm): docs/attachments.md shows it
        subprocess.run(["pdftoppm", "-png", "-r", "70", "-singlefile", "-", str(Path(folder) / "statement")],
                       input=statement, check=True)
