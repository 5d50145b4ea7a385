"""The pay-now link (issue 24 item 2): an https ``payment_url`` per invoice from the CSV import, Stripe's
``hosted_invoice_url`` (tests/unit/test_stripe_import.py) or the API, shown in the reminder as a button and a plain link, in every shipped language,
never in a log line; a bad link refused naming its line; the merge rule of every source (left out: kept; empty:
cleared). Both backends, through a real SMTP server (aiosmtpd) for the sent email."""

from __future__ import annotations

import email
import logging
import mailbox
from datetime import timedelta
from pathlib import Path

import pytest

from oncebeat.clock import ClockProcess
from oncebeat.errors import ImportRejected
from oncebeat.mail import Mailer, MailSink
from oncebeat.reminders.bulk import BulkOptions
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.render import Renderer
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

URL = "https://pay.example.com/i/INV-1?token=s3cr3t&lang=en"
HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on"


def write(path: Path, header: str, *rows: str) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def stored_url(store: Store, number: str) -> str | None:
    [row] = store.read("invoice_by_number", number=number)
    return row["payment_url"]


def test_the_import_keeps_checks_and_clears_the_link(store: Store, sim_clock: SimulatedClock, tmp_path: Path) -> None:
    service = ReminderService(store, Policy(), clock=sim_clock)
    opts = BulkOptions(today=sim_clock.now().date())
    row = "INV-1,ana@example.com,Ana,EUR,12.50,2026-01-05,2026-02-04"
    service.import_invoices_csv(write(tmp_path / "a.csv", HEADER + ",payment_url", f"{row},{URL}"), opts)
    assert stored_url(store, "INV-1") == URL
    service.import_invoices_csv(write(tmp_path / "b.csv", HEADER, row), opts)  # no column: kept
    assert stored_url(store, "INV-1") == URL
    for bad, why in (("http://pay.example.com/i/1", "not an https"), ("javascript:alert(1)", "not an https"),
                     ("https://user:pw@pay.example.com/", "password"), ("https://pay.example.com/a b", "space")):
        with pytest.raises(ImportRejected) as info:
            service.import_invoices_csv(write(tmp_path / "c.csv", HEADER + ",payment_url", f'{row},"{bad}"'), opts)
        text = "\n".join(info.value.problems)
        assert "c.csv:2" in text and "payment_url" in text and why in text, text
        assert stored_url(store, "INV-1") == URL  # nothing applied
    service.import_invoices_csv(write(tmp_path / "d.csv", HEADER + ",payment_url", f"{row},"), opts)  # empty: cleared
    assert stored_url(store, "INV-1") is None


@pytest.mark.parametrize("locale,button", [("en_US", "Pay now"), ("de_DE", "Jetzt bezahlen"),
                                           ("fr_FR", "Payer maintenant"), ("es_ES", "Pagar ahora")])
def test_the_email_shows_a_button_and_a_plain_link(locale: str, button: str) -> None:
    from datetime import date

    email_ = Renderer().render(invoice_number="INV-1", customer_name="Ana", customer_locale=locale, currency="EUR",
                               amount_due=1250, due_on=date(2026, 2, 4), issued_on=date(2026, 1, 5), stage=7,
                               days_past_due=7, payment_url=URL)
    escaped = URL.replace("&", "&amp;")
    assert f'href="{escaped}"' in email_.html and f">{button}</a>" in email_.html  # the button
    assert f">{escaped}</a>" in email_.html  # and the link written out
    assert URL in email_.text and button in email_.text
    without = Renderer().render(invoice_number="INV-1", customer_name="Ana", customer_locale=locale, currency="EUR",
                                amount_due=1250, due_on=date(2026, 2, 4), issued_on=date(2026, 1, 5), stage=7,
                                days_past_due=7)
    assert "href=" not in without.html and button not in without.text  # the "how to pay" words instead


def test_the_sent_reminder_carries_the_link_and_no_log_line_does(store: Store, sim_clock: SimulatedClock,
                                                                 tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="oncebeat")
    sink = MailSink(tmp_path / "maildir").start()
    mailer = Mailer(sink.url)
    try:
        service = ReminderService(store, Policy(), clock=sim_clock, mailer=mailer)
        app = build_app(service)
        due = sim_clock.now().date() - timedelta(days=2)
        service.import_invoices_csv(write(tmp_path / "a.csv", HEADER + ",payment_url",
                                          f"INV-1,ana@example.com,Ana,EUR,12.50,{due - timedelta(days=30)},{due},"
                                          f"{URL}"), BulkOptions(today=sim_clock.now().date()))
        clock = ClockProcess(app, store, clock=sim_clock)
        clock.start()
        sim_clock.set(app.schedules["reminders"].schedule().next_after(sim_clock.now()))
        clock.tick()
        Worker(app, store, clock=sim_clock).drain()
    finally:
        mailer.close()
        sink.stop()
    [msg] = list(mailbox.Maildir(tmp_path / "maildir", factory=None))
    parsed = email.message_from_bytes(msg.as_bytes())
    bodies = [part.get_payload(decode=True).decode() for part in parsed.walk() if not part.is_multipart()]
    assert any(URL in b for b in bodies) and any(URL.replace("&", "&amp;") in b for b in bodies)
    assert "s3cr3t" not in caplog.text and "pay.example.com" not in caplog.text
