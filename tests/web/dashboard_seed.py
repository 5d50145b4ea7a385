"""Fill a database with a week of real activity for the dashboard's browser tests and screenshots.

Everything goes through the real engine on simulated time that ends at the real present: the clock
fires the reminder schedule hourly-checked over 7 days, a worker sends through a real SMTP sink, one
send is killed after the server accepted it (an effect in doubt), one is rejected for good (failed),
paid invoices are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from oncebeat.clock import ClockProcess
from oncebeat.crashpoints import SimulatedCrash, crashpoints
from oncebeat.mail import Mailer, MailSink
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import open_store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

CUSTOMERS = [
    Customer(email="ana.lima@example.test", name="Ana Lima", locale="pt_BR", tz="America/Sao_Paulo"),
    Customer(email="jonas.berg@example.test", name="Jonas Berg", locale="de_DE", tz="Europe/Berlin"),
    Customer(email="claire.dubois@example.test", name="Claire Dubois", locale="fr_FR", tz="Europe/Paris"),
    Customer(email="sam.okafor@example.test", name="Sam Okafor", locale="en_GB", tz="Europe/London"),
    Customer(email="mia.chen@example.test", name="Mia Chen", locale="en_US", tz="America/Chicago"),
    Customer(email="kenji.sato@example.test", name="Kenji Sato", locale="en_US", tz="Asia/Tokyo"),
]
CURRENCY = {"ana": "USD", "jonas": "EUR", "claire": "EUR", "sam": "GBP", "mia": "USD", "kenji": "JPY"}


@dataclass(frozen=True)
class Seeded:
    in_doubt_key: str
    invoice_number: str
    customer_email: str
    failed_invoice: str


def _invoices(today: date) -> list[Invoice]:
    out = []
    for n in range(24):
        c = CUSTOMERS[n % len(CUSTOMERS)]
        currency = CURRENCY[c.email.split(".")[0]]
        due = today - timedelta(days=(n * 5) % 75 - 3)
        amount = (12_500 + n * 3_371) if currency != "JPY" else (18_000 + n * 1_500)
        paid = n % 7 == 6
        out.append(Invoice(number=f"INV-{2026_0100 + n}", customer_email=c.email, currency=currency,
                           amount_due=amount, issued_on=due - timedelta(days=30), due_on=due,
                           status="paid" if paid else "open", paid_on=due + timedelta(days=2) if paid else None))
    return out


def seed(db_url: str, workdir: Path, *, now: datetime | None = None) -> Seeded:
    """Seven simulated days ending at ``now`` (default the real present) in ``db_url``; mail in ``workdir``."""
    end = (now or datetime.now(UTC)).replace(microsecond=0)
    clock = SimulatedClock(end - timedelta(days=7))
    store = open_store(db_url)
    store.migrate()
    sink = MailSink(workdir / "maildir").start()
    mailer = Mailer(sink.url)
    policy = Policy()
    try:
        service = ReminderService(store, policy, clock=clock, mailer=mailer)
        app = build_app(service)
        service.upsert(CUSTOMERS, _invoices(end.astimezone(policy.zone).date() - timedelta(days=7)))
        clk = ClockProcess(app, store, clock=clock, source=current_source("clock", name="clock.1"))
        clk.start()
        worker = Worker(app, store, clock=clock, source=current_source("worker", name="worker.1"))
        crashed = rejected = False
        t = clock.now()
        last_hour = end - timedelta(hours=1)
        while t < last_hour:
            t = min(last_hour, t + timedelta(hours=1))
            clock.set(t)
            clk.tick()
            worker.drain(max_batches=1)  # the scan: it creates the pending reminders and their send jobs
            pending = bool(store.read("pending_reminders"))
            if pending and not crashed:  # one send dies after the server's 250, before it is recorded
                crashpoints.arm("effect_before_record")
                try:
                    worker.drain()
                except SimulatedCrash:
                    pass
                finally:
                    crashpoints.disarm()
                crashed = True
                clock.advance(worker.lease_seconds + 1)
                worker = Worker(app, store, clock=clock, source=current_source("worker", name="worker.2"))
                worker.rescue()
            elif pending and not rejected:
                sink.faults.fail_next(1, code=550, text="5.1.1 mailbox unavailable")
                rejected = True
            worker.drain()
        # The last hour: two manual fires of the scan and a send of a reminder that does not exist (discarded).
        for minutes in (50, 20):
            clock.set(end - timedelta(minutes=minutes))
            clk.trigger("reminders")
            worker.drain()
        Queue(store, clock=clock, source=current_source("api")).enqueue("reminders.send", {"reminder_id": 999_999})
        worker.drain()
        clock.set(end)
        reminders = store.read("list_reminders")
        doubt = next(r for r in reminders if r["state"] == "in_doubt")
        failed = next((r for r in reminders if r["state"] == "failed"), doubt)
        story = service.invoice_story(doubt["number"])
        assert story is not None
        return Seeded(in_doubt_key=f"reminder:{doubt['id']}", invoice_number=doubt["number"],
                      customer_email=story["invoice"]["email"],
                      failed_invoice=failed["number"])
    finally:
        mailer.close()
        sink.stop()
        store.close()
