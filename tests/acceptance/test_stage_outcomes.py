"""The stage effectiveness reads ``stage_outcomes`` (reminders 0025), never a scan of every invoice per stage, and is
never wrong.

The counts are kept by triggers on invoices and reminders and folded by ``compact_stage_outcomes`` (the daily scan):
the report must equal ``report_stage_effectiveness_from_invoices`` (the same rows computed from the invoices and
reminders themselves) after every kind of write that moves what it counts: imports, payments (dated, undated,
before and after an anchor), reopened payments, voids, uncollectible, re-imports moving due dates and currencies,
reminders sent one by one and several of one invoice in one statement (a grouped notice), a sent reminder moved or
deleted, invoices deleted, a stage sent for the first time (read from the invoices until it is tracked), folds and
the scan; on PostgreSQL also a TRUNCATE, and payments running beside sends of the same invoices and the fold. Both
backends (PostgreSQL when the server answers; in CI it must).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from oncebeat.errors import TransientStoreError
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice, Payment
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.reports import Month, stage_effectiveness
from oncebeat.reminders.reports.effectiveness import compact_stage_outcomes, track_stage_outcomes
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.store import Store, open_store
from reports_book import AS_OF, seeded_runtime

Row = tuple[int, str, int, int, int, int, int, int, int, int]
#: (first, last, as_of) of the comparisons: the whole book, one month, an as_of inside the windows of recent sends.
RANGES = [(Month(2025, 11), Month(2026, 6), AS_OF), (Month(2026, 3), Month(2026, 3), AS_OF),
          (Month(2026, 1), Month(2026, 4), date(2026, 3, 9)), (Month(2026, 2), Month(2026, 5), date(2026, 5, 30))]


@pytest.fixture
def rt(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    with seeded_runtime(db_url, tmp_path) as runtime:
        yield runtime


def _sql(store: Store, text: str) -> str:
    return text.replace("?", "%s") if store.backend == "postgres" else text


def _rows(store: Store, name: str, first: Month, last: Month, as_of: date, currency: str | None) -> list[Row]:
    return [(int(r["stage"]), r["grp"], int(r["unpaid"]), int(r["undated"] or 0),
             *(int(r[f"{k}_{n}"] or 0) for n in (3, 7, 14) for k in ("eligible", "paid")))  # type: ignore[misc]
            for r in store.read(name, start=first.start, end=last.end, as_of=as_of, currency=currency)]


def _assert_same(store: Store) -> list[Row]:
    """The kept counts equal the reference over several ranges and currencies; returns the whole book's rows."""
    assert store.read("stage_outcomes_untracked") == []  # so stage_effectiveness reads the kept counts
    for first, last, as_of in RANGES:
        for currency in (None, "EUR", "USD", "JPY", "CHF"):
            assert _rows(store, "report_stage_effectiveness", first, last, as_of, currency) == \
                _rows(store, "report_stage_effectiveness_from_invoices", first, last, as_of, currency), \
                (first, last, as_of, currency)
    first, last, as_of = RANGES[0]
    return _rows(store, "report_stage_effectiveness", first, last, as_of, None)


def _count(store: Store) -> int:
    with store.transaction() as tx:
        return int(tx.execute("SELECT COUNT(*) AS n FROM stage_outcomes", ())[0]["n"])


def _send(store: Store, sends: list[tuple[str, int, str]]) -> None:
    """Reminders recorded sent in SQL (as the seeded book's), one statement each."""
    now = datetime(2026, 4, 10, 8, tzinfo=UTC)
    with store.transaction() as tx:
        for number, stage, day in sends:
            tx.execute(_sql(store, "INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, "
                                   "updated_at, sent_at) SELECT id, ?, 'sent', ?, ?, ?, ? FROM invoices "
                                   "WHERE number = ?"), (stage, date.fromisoformat(day), now, now, now, number))


@contextmanager
def _deadlock_rolls_back(deadlocks: list[str]) -> Iterator[None]:
    try:
        yield
    except TransientStoreError as exc:
        if "deadlock" not in str(exc):
            raise
        deadlocks.append(str(exc))


def _invoices(rng: random.Random, prefix: str, n: int) -> list[Invoice]:
    out = []
    for i in range(n):
        issued = date(2026, 1, 1) + timedelta(days=rng.randrange(90))
        status = rng.choice(("open", "open", "paid", "void", "uncollectible"))
        due = issued + timedelta(days=rng.randrange(-3, 40))
        out.append(Invoice(number=f"{prefix}{i}", customer_email=f"x{i % 6}@example.test",
                           currency=rng.choice(("EUR", "USD", "JPY", "CHF")), amount_due=rng.randrange(1, 90_000),
                           issued_on=issued, due_on=due, status=status,
                           paid_on=due + timedelta(days=rng.randrange(-5, 25)) if status == "paid" else None))
    return out


def test_the_kept_stage_outcomes_equal_the_reference_after_every_kind_of_write(rt: Runtime) -> None:
    svc, store = rt.service, rt.store
    # The book's reminders were sent after the migration: stages 1 and 7 are read from the invoices until tracked.
    assert [int(r["stage"]) for r in store.read("stage_outcomes_untracked")] == [1, 7]
    reference = stage_effectiveness(store, first=Month(2026, 1), last=Month(2026, 4), as_of=AS_OF)
    assert track_stage_outcomes(store) == [1, 7]
    assert track_stage_outcomes(store) == []  # nothing new: nothing locked, nothing added
    assert stage_effectiveness(store, first=Month(2026, 1), last=Month(2026, 4), as_of=AS_OF) == reference
    assert [r[:2] for r in _assert_same(store)] == [(1, "baseline"), (1, "reminded"), (7, "baseline"),
                                                    (7, "reminded")]
    rng = random.Random(25)
    svc.upsert([Customer(email=f"x{i}@example.test", name=f"X {i}") for i in range(6)],
               invoices := _invoices(rng, "X", 90))  # an import: open, paid (some before due), void, uncollectible
    _assert_same(store)
    # Sends: one by one, before and after payments, on invoices paid without a date too.
    _send(store, [(f"X{i}", 1, str(invoices[i].due_on + timedelta(days=1 + i % 3))) for i in range(0, 90, 2)])
    _assert_same(store)
    rows = _count(store)
    svc.upsert([], invoices)  # the same rows again: nothing moves, no row is added
    assert _count(store) == rows
    svc.apply_payments([Payment(number=f"X{i}", paid_on=max(invoices[i].issued_on,
                                                          invoices[i].due_on + timedelta(days=i % 17)))
                        for i in range(0, 90, 3)])
    _assert_same(store)
    # A grouped notice: stage 7 of several invoices, two stages of one invoice, in one statement from pending.
    now = datetime(2026, 4, 10, 8, tzinfo=UTC)
    with store.transaction() as tx:
        for i in range(1, 40, 4):
            for stage in (7, 14):
                tx.execute(_sql(store, "INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, "
                                       "updated_at) SELECT id, ?, 'pending', ?, ?, ? FROM invoices WHERE number = ?"),
                           (stage, invoices[i].due_on + timedelta(days=stage + i % 4), now, now, f"X{i}"))
        tx.execute(_sql(store, "UPDATE reminders SET state = 'sent', sent_at = ? WHERE state = 'pending'"), (now,))
    # Stage 14 was never sent before: the report reads the invoices (still right) until it is tracked.
    assert [int(r["stage"]) for r in store.read("stage_outcomes_untracked")] == [14]
    reference = stage_effectiveness(store, first=Month(2025, 11), last=Month(2026, 6), as_of=AS_OF)
    assert 14 in [r.stage for r in reference]
    assert track_stage_outcomes(store) == [14]
    assert stage_effectiveness(store, first=Month(2025, 11), last=Month(2026, 6), as_of=AS_OF) == reference
    _assert_same(store)
    changed = [Invoice(number=i.number, customer_email=i.customer_email, currency="CHF" if n % 4 == 0 else i.currency,
                       amount_due=i.amount_due, issued_on=i.issued_on, due_on=i.due_on + timedelta(days=n % 9 - 4),
                       status="void" if n % 7 == 0 else i.status, paid_on=i.paid_on)
               for n, i in enumerate(invoices)]
    svc.upsert([], changed)  # a re-import moving due dates and currencies; credit notes void some
    _assert_same(store)
    svc.upsert([], [Invoice(number=i.number, customer_email=i.customer_email, currency=i.currency,
                            amount_due=i.amount_due, issued_on=i.issued_on, due_on=i.due_on, status="open")
                    for i in changed[:30]], reopen=True)  # payments undone: open again
    _assert_same(store)
    with store.transaction() as tx:  # what only SQL does
        tx.execute(_sql(store, "UPDATE invoices SET status = 'uncollectible' WHERE number IN (?, ?)"), ("X1", "X2"))
        tx.execute(_sql(store, "UPDATE invoices SET paid_on = NULL WHERE status = 'paid' AND number LIKE ?"),
                   ("X3%",))
        tx.execute(_sql(store, "UPDATE invoices SET status = 'paid', paid_on = due_on WHERE number IN (?, ?)"),
                   ("X5", "X9"))
        tx.execute(_sql(store, "DELETE FROM invoices WHERE number LIKE ? AND NOT EXISTS (SELECT 1 FROM reminders r "
                               "WHERE r.invoice_id = invoices.id)"), ("X7%",))
        tx.execute(_sql(store, "UPDATE reminders SET business_date = business_date - 2 WHERE stage = 7")
                   if store.backend == "postgres" else
                   "UPDATE reminders SET business_date = date(business_date, '-2 days') WHERE stage = 7", ())
        tx.execute(_sql(store, "UPDATE reminders SET state = 'failed' WHERE stage = 14 AND invoice_id IN "
                               "(SELECT id FROM invoices WHERE number IN (?, ?))"), ("X1", "X5"))
        tx.execute(_sql(store, "DELETE FROM reminders WHERE stage = 1 AND invoice_id IN "
                               "(SELECT id FROM invoices WHERE number IN (?, ?, ?))"), ("X0", "X2", "C"))
        tx.execute(_sql(store, "UPDATE invoices SET updated_at = updated_at WHERE number LIKE ?"), ("X%",))
    _assert_same(store)
    before, rows = _assert_same(store), _count(store)
    with store.transaction() as tx:
        compact_stage_outcomes(tx)
    assert _count(store) < rows  # folded: one row per (stage, group, currency, anchor)
    assert _assert_same(store) == before
    svc.apply_payments([Payment(number=f"X{i}", paid_on=max(date(2026, 3, 20), invoices[i].issued_on))
                        for i in range(1, 90, 2) if not str(i).startswith("7")])  # X7… may be deleted
    rt.service.scan(occurrence_id=1, business_date=AS_OF, source=current_source("worker"))  # folds them
    _assert_same(store)
    if store.backend == "postgres":
        with store.transaction() as tx:  # row triggers do not fire: the statement trigger rebuilds every row
            tx.execute("TRUNCATE reminders CASCADE", ())
        _assert_same(store)
        _send(store, [("X4", 1, "2026-03-01"), ("X6", 3, "2026-03-02")])
        assert track_stage_outcomes(store) == [3]
        _assert_same(store)


@pytest.mark.postgres
def test_payments_beside_sends_of_the_same_invoices_never_make_the_counts_wrong(pg_db_url: str,
                                                                             tmp_path: Path) -> None:
    """Writers pay and reopen invoices while others send their reminders (several stages of one invoice at once,
    as a grouped notice) and the fold runs again and again, each in its own transactions (PostgreSQL: the triggers
    lock the invoices a reminder change touches, so each difference is computed on the state the one before left);
    afterwards, and folded once more, the kept counts equal the reference. Writers pick invoices in id order; a
    transaction that still ends in a deadlock (PostgreSQL aborts one of the two) is rolled back whole, which must
    leave the counts right too."""
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=pg_db_url, config=tmp_path / "oncebeat.toml")
    try:
        svc, store = runtime.service, runtime.store
        rng = random.Random(7)
        invoices = [i for i in _invoices(rng, "W", 120) if i.status != "void"]
        svc.upsert([Customer(email=f"x{i}@example.test", name=f"X {i}") for i in range(6)], invoices)
        _send(store, [(invoices[0].number, s, "2026-02-01") for s in (1, 7, 14)])
        assert track_stage_outcomes(store) == [1, 7, 14]
        with store.transaction() as tx:
            tx.execute("DELETE FROM reminders", ())
        numbers = [i.number for i in invoices]
        issued = {i.number: i.issued_on for i in invoices}
        errors: list[BaseException] = []
        deadlocks: list[str] = []
        done = threading.Event()

        def payer(k: int) -> None:
            try:
                r = random.Random(k)
                for _step in range(8):
                    picked = sorted(r.sample(numbers, 25), key=numbers.index)
                    with _deadlock_rolls_back(deadlocks):
                        svc.apply_payments([Payment(number=n, paid_on=issued[n] + timedelta(days=r.randrange(40)))
                                            for n in picked])
                    with _deadlock_rolls_back(deadlocks):
                        svc.upsert([], [i for i in invoices if i.number in picked[:8]], reopen=True)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        def sender(k: int) -> None:
            try:
                r = random.Random(100 + k)
                now = datetime(2026, 4, 10, 8, tzinfo=UTC)
                for _step in range(8):
                    picked = sorted(r.sample(numbers, 6), key=numbers.index)
                    with _deadlock_rolls_back(deadlocks), store.transaction() as tx:
                        for n in picked:
                            for stage in (1, 7, 14):
                                tx.execute("INSERT INTO reminders (invoice_id, stage, state, business_date, "
                                           "created_at, updated_at) SELECT id, %s, 'pending', due_on + %s, %s, %s "
                                           "FROM invoices WHERE number = %s ON CONFLICT DO NOTHING",
                                           (stage, stage + r.randrange(3), now, now, n))
                        tx.execute("UPDATE reminders SET state = 'sent', sent_at = %s WHERE state = 'pending' AND "
                                   "invoice_id IN (SELECT id FROM invoices WHERE number = ANY(%s))", (now, picked))
            except BaseException as exc:
                errors.append(exc)

        def folder() -> None:
            try:
                while not done.is_set():
                    with store.transaction() as tx:
                        compact_stage_outcomes(tx)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=payer, args=(k,)) for k in range(2)] + \
            [threading.Thread(target=sender, args=(k,)) for k in range(2)]
        fold = threading.Thread(target=folder)
        fold.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        fold.join()
        assert not errors, errors
        kept = _assert_same(store)
        assert {r[0] for r in kept} == {1, 7, 14}
        with store.transaction() as tx:
            compact_stage_outcomes(tx)
        assert _assert_same(store) == kept
    finally:
        runtime.close()


@pytest.mark.postgres
@pytest.mark.parametrize("import_kind", ["payments", "invoices"])
def test_an_import_listing_a_customers_invoices_out_of_id_order_waits_for_a_send_instead_of_deadlocking(
        pg_db_url: str, tmp_path: Path, import_kind: str) -> None:
    """A send's reminder change locks its invoices in id order (the 0025 trigger); an import of payments or of
    invoices whose file lists the same two invoices the other way round used to lock the second one first and then
    wait for the first: the send, wanting the second, closed the cycle and PostgreSQL aborted one of them
    (``deadlock detected``). Imports now write in invoice id order, so the import just waits for the send."""
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=pg_db_url, config=tmp_path / "oncebeat.toml")
    try:
        svc, store = runtime.service, runtime.store
        first, second = _invoices(random.Random(3), "D", 2)
        first, second = (dataclasses.replace(i, status="open", paid_on=None) for i in (first, second))
        svc.upsert([Customer(email=f"x{i}@example.test", name=f"X {i}") for i in range(6)], [first, second])
        ids = {r["number"]: int(r["id"]) for r in store.read("invoice_states", numbers=[first.number, second.number])}
        assert ids[first.number] < ids[second.number]
        errors: list[BaseException] = []

        def importer() -> None:  # the file lists the higher id first
            try:
                if import_kind == "payments":
                    svc.apply_payments([Payment(number=i.number, paid_on=i.due_on) for i in (second, first)])
                else:
                    svc.upsert([], [dataclasses.replace(i, amount_due=i.amount_due + 1) for i in (second, first)])
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        with store.transaction() as send:  # the send: its trigger's locks, taken one at a time
            send_pid = int(send.execute("SELECT pg_backend_pid() AS pid", ())[0]["pid"])
            lock = "SELECT id FROM invoices WHERE id = %s FOR NO KEY UPDATE"
            send.execute(lock, (ids[first.number],))
            thread = threading.Thread(target=importer)
            thread.start()
            deadline = datetime.now(UTC) + timedelta(seconds=30)
            with open_store(pg_db_url) as probe:  # until the import waits on the send's first lock
                while True:
                    with probe.transaction() as tx:
                        if tx.execute("SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                      (send_pid,)):
                            break
                    assert datetime.now(UTC) < deadline and thread.is_alive() and not errors, errors
                    time.sleep(0.01)
            send.execute(lock, (ids[second.number],))  # the deadlock, if the import held the second one
        thread.join(30)
        assert not thread.is_alive() and not errors, errors
        if import_kind == "payments":
            assert {r["status"] for r in store.read("invoice_states", numbers=[first.number, second.number])} == \
                {"paid"}
    finally:
        runtime.close()
