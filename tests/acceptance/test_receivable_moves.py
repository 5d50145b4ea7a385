"""DSO and CEI read ``receivable_moves`` (reminders 0023), never a scan of every invoice, and are never wrong.

The moves are kept by triggers on invoices and folded by ``compact_receivable_moves`` (the daily scan): their sums
must equal ``report_receivable_moves_from_invoices`` (the same figures computed from the invoices themselves) after
every kind of write: imports, the same import again, payments, re-imports that change amounts, dates and
currencies, voids, reopened payments, uncollectible, Stripe's status moves, SQL updates (a payment date removed,
an issue date moved) and deletes, folds, the scan, the what-if copy of the book; and, on PostgreSQL, with writers
running beside the fold. Both backends (PostgreSQL when the server answers; in CI it must).
"""

from __future__ import annotations

import copy
import json
import random
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import shared_data
from oncebeat.provenance import current_source
from oncebeat.reminders.bookcopy import copy_book
from oncebeat.reminders.model import Customer, Invoice, Payment
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.reports import Month, build_many
from oncebeat.reminders.reports.receivables import compact_receivable_moves
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.reminders.stripe import StripeWebhooks
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock
from reports_book import AS_OF, seeded_runtime

STRIPE_INVOICE = shared_data("stripe_fixtures") / "invoice.json"
Move = tuple[str, str, str, int, int]


@pytest.fixture
def rt(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    with seeded_runtime(db_url, tmp_path) as runtime:
        yield runtime


def _sql(store: Store, text: str) -> str:
    return text.replace("?", "%s") if store.backend == "postgres" else text


def _moves(store: Store, name: str, currency: str | None = None) -> list[Move]:
    return sorted((r["currency"], r["month"], r["kind"], int(r["amount"]), int(r["n"]))
                  for r in store.read(name, currency=currency))


def _assert_same_moves(store: Store) -> list[Move]:
    kept = _moves(store, "report_receivable_moves")
    assert kept == _moves(store, "report_receivable_moves_from_invoices")
    for currency in ("EUR", "JPY", "CHF"):
        assert _moves(store, "report_receivable_moves", currency) == \
            _moves(store, "report_receivable_moves_from_invoices", currency), currency
    return kept


def _rows(store: Store) -> int:
    with store.transaction() as tx:
        return int(tx.execute("SELECT COUNT(*) AS n FROM receivable_moves", ())[0]["n"])


def _invoices(rng: random.Random, prefix: str, n: int) -> list[Invoice]:
    out = []
    for i in range(n):
        issued = date(2025, 11, 1) + timedelta(days=rng.randrange(150))
        status = rng.choice(("open", "open", "paid", "void", "uncollectible"))
        out.append(Invoice(number=f"{prefix}{i}", customer_email=f"x{i % 6}@example.test",
                           currency=rng.choice(("EUR", "USD", "JPY", "CHF")), amount_due=rng.randrange(0, 90_000),
                           issued_on=issued, due_on=issued + timedelta(days=rng.randrange(-3, 60)), status=status,
                           paid_on=issued + timedelta(days=rng.randrange(-2, 80)) if status == "paid" else None))
    return out


def test_the_receivable_moves_equal_the_invoices_figures_after_every_kind_of_write(rt: Runtime,
                                                                                  tmp_path: Path) -> None:
    svc, store = rt.service, rt.store
    assert {c for c, *_ in _assert_same_moves(store)} == {"EUR", "JPY", "USD"}  # the seeded book, backfilled
    customers = [Customer(email=f"x{i}@example.test", name=f"X {i}") for i in range(6)]
    invoices = _invoices(random.Random(23), "X", 80)
    svc.upsert(customers, invoices)  # an import: open, paid (some before issue), void, uncollectible
    _assert_same_moves(store)
    rows = _rows(store)
    svc.upsert(customers, invoices)  # the same rows again: no figure moves, no row is added
    assert _rows(store) == rows
    _assert_same_moves(store)
    svc.apply_payments([Payment(number=f"X{i}", paid_on=date(2026, 4, 1) + timedelta(days=i % 5))
                        for i in range(0, 80, 3)])
    _assert_same_moves(store)
    changed = [Invoice(number=i.number, customer_email=i.customer_email, currency="CHF" if n % 4 == 0 else i.currency,
                       amount_due=i.amount_due + 1000 * n, issued_on=i.issued_on - timedelta(days=n % 40),
                       due_on=i.due_on + timedelta(days=n % 9), status="void" if n % 7 == 0 else i.status,
                       paid_on=i.paid_on)
               for n, i in enumerate(invoices)]
    svc.upsert([], changed)  # a re-import moving amounts, issue and due dates, currencies; credit notes void some
    _assert_same_moves(store)
    svc.upsert([], [Invoice(number=i.number, customer_email=i.customer_email, currency=i.currency,
                            amount_due=i.amount_due, issued_on=i.issued_on, due_on=i.due_on, status="open")
                    for i in changed[:15]], reopen=True)  # payments undone: open again
    _assert_same_moves(store)
    with store.transaction() as tx:  # what only SQL does
        tx.execute(_sql(store, "UPDATE invoices SET status = 'uncollectible' WHERE number IN (?, ?)"), ("X1", "X2"))
        tx.execute(_sql(store, "DELETE FROM invoices WHERE number IN (?, ?)"), ("X5", "X6"))
        tx.execute(_sql(store, "UPDATE invoices SET amount_due = amount_due + 1 WHERE currency = ?"), ("USD",))
        tx.execute(_sql(store, "UPDATE invoices SET paid_on = NULL WHERE number = ? AND status = 'paid'"), ("X3",))
        tx.execute(_sql(store, "UPDATE invoices SET status = 'paid', paid_on = due_on WHERE number = ?"), ("X4",))
        tx.execute(_sql(store, "UPDATE invoices SET updated_at = updated_at WHERE number LIKE ?"), ("X%",))
    _assert_same_moves(store)
    _stripe_moves(rt)
    _assert_same_moves(store)
    before, rows = _moves(store, "report_receivable_moves"), _rows(store)
    with store.transaction() as tx:
        compact_receivable_moves(tx)
    assert _rows(store) < rows  # folded: one row per (currency, month, kind)
    assert _rows(store) == len(before)
    assert _assert_same_moves(store) == before
    svc.apply_payments([Payment(number=f"X{i}", paid_on=date(2026, 4, 2)) for i in range(1, 80, 2) if i != 5])
    with store.transaction() as tx:
        compact_receivable_moves(tx)
    _assert_same_moves(store)
    # The reports read the kept moves: the same tables as the figures of the invoices themselves.
    reference = _moves(store, "report_receivable_moves_from_invoices")
    tables = build_many(store, ("dso", "cei"), first=Month(2025, 11), last=Month(2026, 4), as_of=AS_OF)
    with store.transaction() as tx:
        tx.execute("DELETE FROM receivable_moves", ())
    assert build_many(store, ("dso",), first=Month(2025, 11), last=Month(2026, 4), as_of=AS_OF)[0].rows == []
    with store.transaction() as tx:  # the table rebuilt from the reference gives the same tables
        for m in reference:
            tx.execute(_sql(store, "INSERT INTO receivable_moves (currency, month, kind, amount, n) "
                                   "VALUES (?, ?, ?, ?, ?)"), m)
    assert build_many(store, ("dso", "cei"), first=Month(2025, 11), last=Month(2026, 4), as_of=AS_OF) == tables
    assert any(r["dso"] is not None for r in tables[0].rows)
    # The what-if copy (a SQLite file) keeps its own moves as the copy's invoices are written.
    target = open_store(f"sqlite:///{tmp_path}/whatif.db")
    try:
        target.migrate()
        copy_book(store, target, start=date(2026, 3, 1), before=datetime(2026, 4, 10, tzinfo=UTC), batch=7)
        assert _moves(target, "report_receivable_moves") == \
            _moves(target, "report_receivable_moves_from_invoices")
        assert _moves(target, "report_receivable_moves")
    finally:
        target.close()


def _stripe_moves(rt: Runtime) -> None:
    """Stripe's invoice events: a new invoice finalized, paid, another voided, one marked uncollectible."""
    if not STRIPE_INVOICE.exists():
        raise AssertionError(f"Stripe fixtures not found at {STRIPE_INVOICE}")
    hooks = StripeWebhooks(rt.store, clock=SimulatedClock(datetime(2026, 3, 2, 12, tzinfo=UTC)), secret="whsec_t",
                           tz="America/Chicago")

    def obj(number: str, status: str, **transitions: int) -> dict[str, Any]:
        o = copy.deepcopy(json.loads(STRIPE_INVOICE.read_text(encoding="utf-8")))
        at = int(datetime(2026, 2, 1, 10, tzinfo=UTC).timestamp())
        o.update({"number": number, "status": status, "customer_email": "s@example.test", "customer_name": "S",
                  "created": at, "due_date": at + 86400 * 10, "amount_due": 12345})
        o["status_transitions"] = {**o["status_transitions"], "finalized_at": at, **transitions}
        return o

    paid_at = int(datetime(2026, 3, 3, 15, tzinfo=UTC).timestamp())
    for n, (kind, number, status, extra) in enumerate([
            ("invoice.finalized", "S-1", "open", {}), ("invoice.finalized", "S-2", "open", {}),
            ("invoice.finalized", "S-3", "open", {}), ("invoice.paid", "S-1", "paid", {"paid_at": paid_at}),
            ("invoice.voided", "S-2", "void", {"voided_at": paid_at}),
            ("invoice.marked_uncollectible", "S-3", "uncollectible", {"marked_uncollectible_at": paid_at})]):
        outcome = hooks.apply({"id": f"evt_{n}", "type": kind, "data": {"object": obj(number, status, **extra)}})
        assert outcome.outcome == "applied", outcome


def test_the_scan_folds_the_moves_and_the_figures_stay_the_same(rt: Runtime) -> None:
    rt.service.upsert([Customer(email="y@example.test", name="Y")],
                      [Invoice(number=f"Y{i}", customer_email="y@example.test", currency="EUR", amount_due=100 + i,
                               issued_on=date(2026, 3, 1), due_on=date(2026, 3, 1 + i % 3), status="open")
                       for i in range(9)])
    rt.service.apply_payments([Payment(number="Y0", paid_on=date(2026, 4, 1))])
    before = _moves(rt.store, "report_receivable_moves_from_invoices")
    rt.service.scan(occurrence_id=1, business_date=AS_OF, source=current_source("worker"))
    assert _rows(rt.store) == len(before)  # one row per key
    assert _assert_same_moves(rt.store) == before


@pytest.mark.postgres
def test_writers_beside_the_fold_never_make_the_moves_wrong(pg_db_url: str, tmp_path: Path) -> None:
    """Four writers import and pay in their own transactions while the fold runs again and again (PostgreSQL: one
    statement, one snapshot); afterwards, and folded once more, the moves equal the invoices' figures."""
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=pg_db_url, config=tmp_path / "oncebeat.toml")
    try:
        svc, store = runtime.service, runtime.store
        svc.upsert([Customer(email=f"x{i}@example.test", name=f"X {i}") for i in range(6)], [])
        errors: list[BaseException] = []
        done = threading.Event()

        def writer(k: int) -> None:
            try:
                rng = random.Random(k)
                for step in range(6):
                    batch = _invoices(rng, f"W{k}-{step}-", 15)
                    svc.upsert([], batch)
                    svc.apply_payments([Payment(number=i.number, paid_on=date(2026, 4, 1))
                                        for i in batch if i.status == "open" and rng.random() < 0.5])
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        def folder() -> None:
            try:
                while not done.is_set():
                    with store.transaction() as tx:
                        compact_receivable_moves(tx)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        fold = threading.Thread(target=folder)
        fold.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        fold.join()
        assert not errors, errors
        assert _assert_same_moves(store)
        with store.transaction() as tx:
            compact_receivable_moves(tx)
        assert _assert_same_moves(store)
    finally:
        runtime.close()
