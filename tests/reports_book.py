"""A small book whose collection reports are computed by hand (tests/acceptance/test_reports.py checks them;
the Reports page's browser test shows them). Three currencies, three months (January to March 2026), read on
AS_OF = 2026-04-10.

EUR (cents), customer eur@example.test:
  A  issued 01-05 due 02-04  100000  paid 01-20
  B  issued 01-15 due 02-14  200000  paid 02-10
  C  issued 01-25 due 01-31   50000  open                 stage 1 sent 02-01, stage 7 sent 02-07
  D  issued 02-10 due 03-12  300000  paid 03-05
  E  issued 02-20 due 03-22  150000  open                 stage 1 sent 03-23
  F  issued 03-01 due 03-31   80000  uncollectible
  G  issued 03-15 due 04-14  400000  void
  H  issued 03-20 due 04-19  120000  paid 04-05
JPY (yen), customer jpy@example.test:
  J1 issued 02-03 due 03-05   50000  paid, no payment date
  J2 issued 01-10 due 02-09    7000  open
USD (cents), customer usd@example.test:
  K  issued 02-01 due 03-01   10000  paid 03-04           stage 1 sent 03-02
  L  issued 02-01 due 03-01   10000  paid 03-08           stage 1 sent 03-02, stage 7 sent 03-08
  M  issued 03-01 due 04-01   10000  paid 04-04           stage 1 sent 04-02
  N  issued 02-01 due 03-01   10000  paid 03-01           stage 1 sent 03-02 (paid the day before)
  P  issued 02-01 due 03-01   10000  paid 03-10           never reminded
  Q  issued 03-10 due 04-09   25000  open                 never reminded
Holds (created UTC):
  promise P1 on E  until 03-30 (placed 03-25)   P2 on H until 04-06 (03-25)   P3 on K until 03-03 (03-01)
  promise P4 on customer usd@ until 04-20 (placed 04-08)   P5 on customer jpy@ until 03-10 (placed 02-20)
  dispute D1 on C placed 02-10T23:30Z released 03-01   D2 on G placed 03-16T10:00Z
  dispute D3 on customer eur@ placed 03-31T23:59:59Z
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.store import Store

AS_OF = date(2026, 4, 10)

INVOICES: list[tuple[str, str, str, int, str, str, str, str | None]] = [
    # number, customer, currency, amount, issued, due, status, paid_on
    ("A", "eur", "EUR", 100000, "2026-01-05", "2026-02-04", "paid", "2026-01-20"),
    ("B", "eur", "EUR", 200000, "2026-01-15", "2026-02-14", "paid", "2026-02-10"),
    ("C", "eur", "EUR", 50000, "2026-01-25", "2026-01-31", "open", None),
    ("D", "eur", "EUR", 300000, "2026-02-10", "2026-03-12", "paid", "2026-03-05"),
    ("E", "eur", "EUR", 150000, "2026-02-20", "2026-03-22", "open", None),
    ("F", "eur", "EUR", 80000, "2026-03-01", "2026-03-31", "uncollectible", None),
    ("G", "eur", "EUR", 400000, "2026-03-15", "2026-04-14", "void", None),
    ("H", "eur", "EUR", 120000, "2026-03-20", "2026-04-19", "paid", "2026-04-05"),
    ("J1", "jpy", "JPY", 50000, "2026-02-03", "2026-03-05", "paid", "2026-03-06"),  # date removed below
    ("J2", "jpy", "JPY", 7000, "2026-01-10", "2026-02-09", "open", None),
    ("K", "usd", "USD", 10000, "2026-02-01", "2026-03-01", "paid", "2026-03-04"),
    ("L", "usd", "USD", 10000, "2026-02-01", "2026-03-01", "paid", "2026-03-08"),
    ("M", "usd", "USD", 10000, "2026-03-01", "2026-04-01", "paid", "2026-04-04"),
    ("N", "usd", "USD", 10000, "2026-02-01", "2026-03-01", "paid", "2026-03-01"),
    ("P", "usd", "USD", 10000, "2026-02-01", "2026-03-01", "paid", "2026-03-10"),
    ("Q", "usd", "USD", 25000, "2026-03-10", "2026-04-09", "open", None),
]

SENT: list[tuple[str, int, str]] = [  # invoice, stage, business date of the send
    ("C", 1, "2026-02-01"), ("C", 7, "2026-02-07"), ("E", 1, "2026-03-23"), ("K", 1, "2026-03-02"),
    ("L", 1, "2026-03-02"), ("L", 7, "2026-03-08"), ("M", 1, "2026-04-02"), ("N", 1, "2026-03-02"),
]

HOLDS: list[tuple[str, str | None, str | None, str | None, datetime, datetime | None]] = [
    # reason, invoice, customer, promise_until, created_at, released_at
    ("promise", "E", None, "2026-03-30", datetime(2026, 3, 25, 9, tzinfo=UTC), None),
    ("promise", "H", None, "2026-04-06", datetime(2026, 3, 25, 9, tzinfo=UTC), None),
    ("promise", "K", None, "2026-03-03", datetime(2026, 3, 1, 9, tzinfo=UTC), None),
    ("promise", None, "usd", "2026-04-20", datetime(2026, 4, 8, 9, tzinfo=UTC), None),
    ("promise", None, "jpy", "2026-03-10", datetime(2026, 2, 20, 9, tzinfo=UTC), None),
    ("dispute", "C", None, None, datetime(2026, 2, 10, 23, 30, tzinfo=UTC), datetime(2026, 3, 1, 8, tzinfo=UTC)),
    ("dispute", "G", None, None, datetime(2026, 3, 16, 10, tzinfo=UTC), None),
    ("dispute", None, "eur", None, datetime(2026, 3, 31, 23, 59, 59, tzinfo=UTC), None),
]


def _sql(store: Store, text: str) -> str:
    return text.replace("?", "%s") if store.backend == "postgres" else text


def seed(service: Any, store: Store) -> None:
    """Write the book: invoices through the service (as an import does), then what only the engine writes
    (reminder rows, holds) and J1's missing payment date (a paid invoice of oncebeat 0.1's time) in SQL."""
    customers = [Customer(email=f"{c}@example.test", name=c.upper()) for c in ("eur", "jpy", "usd")]
    service.upsert(customers, [
        Invoice(number=n, customer_email=f"{c}@example.test", currency=cur, amount_due=amount,
                issued_on=date.fromisoformat(issued), due_on=date.fromisoformat(due), status=status,
                paid_on=date.fromisoformat(paid) if paid else None)
        for n, c, cur, amount, issued, due, status, paid in INVOICES])
    now = datetime(2026, 4, 10, 8, tzinfo=UTC)
    with store.transaction() as tx:
        tx.execute(_sql(store, "UPDATE invoices SET paid_on = NULL, paid_at = NULL WHERE number = ?"), ("J1",))
        for number, stage, day in SENT:
            sent = datetime.fromisoformat(day + "T09:00:00+00:00")
            tx.execute(_sql(store, "INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, "
                                   "updated_at, sent_at) SELECT id, ?, 'sent', ?, ?, ?, ? FROM invoices "
                                   "WHERE number = ?"),
                       (stage, date.fromisoformat(day), sent, now, sent, number))
        for reason, invoice, customer, until, created, released in HOLDS:
            tx.execute(_sql(store, "INSERT INTO reminder_holds (invoice_id, customer_id, reason, promise_until, "
                                   "created_by, created_at, released_at) VALUES ((SELECT id FROM invoices WHERE "
                                   "number = ?), (SELECT id FROM customers WHERE email = ?), ?, ?, 'cli:test', ?, ?)"),
                       (invoice, f"{customer}@example.test" if customer else None, reason,
                        date.fromisoformat(until) if until else None, created, released))


@contextmanager
def seeded_runtime(db_url: str, folder: Path) -> Iterator[Runtime]:
    """A runtime on ``db_url`` (the default policy written to ``folder``/oncebeat.toml) holding this book
    (:func:`seed`); closed on leaving."""
    write_default_config(folder / "oncebeat.toml")
    runtime = load_runtime(database_url=db_url, config=folder / "oncebeat.toml")
    try:
        seed(runtime.service, runtime.store)
        yield runtime
    finally:
        runtime.close()
