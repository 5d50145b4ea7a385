"""A small harness for reminder tests: a store, a policy, a real SMTP sink, a clock and a worker on simulated time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from oncebeat.clock import ClockProcess
from oncebeat.mail import MailSink, Mailer, read_maildir
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.reminders.tasks import build_app
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

# 2026-03-02 08:00 America/Chicago (CST, UTC-6) = 14:00 UTC
FIRST_FIRE = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)


@dataclass
class Harness:
    store: Store
    sink: MailSink
    clock: SimulatedClock
    policy: Policy = field(default_factory=Policy)

    def __post_init__(self) -> None:
        self.mailer = Mailer(self.sink.url)
        self.service = ReminderService(self.store, self.policy, clock=self.clock, mailer=self.mailer)
        self.app = build_app(self.service)
        self.clk = ClockProcess(self.app, self.store, clock=self.clock, source=current_source("clock"))
        self.clk.start()

    def new_worker(self, name: str = "test worker") -> Worker:
        return Worker(self.app, self.store, clock=self.clock, source=current_source("worker", name=name))

    def add_invoices(self, *invoices: Invoice, customers: tuple[Customer, ...] = ()) -> None:
        custs = list(customers) or [Customer(email="ana@example.com", name="Ana Lima", locale="pt_BR",
                                             tz="America/Sao_Paulo")]
        self.service.upsert(custs, list(invoices))

    def tick_to(self, instant: datetime) -> None:
        self.clock.set(instant)
        self.clk.tick()

    def messages(self) -> list:
        return read_maildir(self.sink.maildir)

    def reminders(self) -> list[dict]:
        return self.store.read("list_reminders")

    def close(self) -> None:
        self.mailer.close()


def invoice(number: str, due_on: date, *, email: str = "ana@example.com", amount: int = 12_345,
            currency: str = "USD") -> Invoice:
    return Invoice(number=number, customer_email=email, currency=currency, amount_due=amount,
                   issued_on=due_on - timedelta(days=30), due_on=due_on)


def maildir_sink(tmp_path: Path) -> MailSink:
    return MailSink(tmp_path / "maildir").start()
