"""Stored stage-effectiveness runs (oncebeat.reminders.reports.runs) on both backends: a run's rows are the live
report's on the same data, a run reads one snapshot (a payment and a send committed by another connection while it
computes are wholly out of it, and its instant is that snapshot's), one run at a time per parameter set, the scan
asks for the morning's run, and the store's snapshot is read-only with a working statement timeout."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from oncebeat.clock import ClockProcess
from oncebeat.errors import QueryTimedOut, StoreError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.reports import Month, default_range, stage_effectiveness
from oncebeat.reminders.reports.runs import (
    RUN_TASK,
    RunParams,
    compute_run,
    newest_run,
    request_run,
    run_pending,
)
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker
from reports_book import AS_OF, seed

JAN, FEB, MAR, APR = Month(2026, 1), Month(2026, 2), Month(2026, 3), Month(2026, 4)
SOURCE = current_source("cli")


@pytest.fixture
def rt(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    write_default_config(tmp_path / "oncebeat.toml")
    runtime = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml",
                           clock=SimulatedClock(datetime(2026, 4, 10, 15, tzinfo=UTC)))
    try:
        yield runtime
    finally:
        runtime.close()


def _sql(store: Store, text: str) -> str:
    return text.replace("?", "%s") if store.backend == "postgres" else text


def _random_book(rt: Runtime, seed_value: int) -> None:
    """250 invoices in two currencies, paid before and after their anchors, with stages -3..14 sent or not (the
    random book of tests/acceptance/test_reports.py)."""
    rng, as_of = random.Random(seed_value), date(2026, 3, 20)
    invoices, sent = [], []
    for n in range(250):
        due = date(2025, 12, 1) + timedelta(days=rng.randrange(90))
        status = rng.choices(["open", "paid", "void", "uncollectible"], [3, 8, 1, 1])[0]
        paid = min(due + timedelta(days=rng.randrange(-5, 40)), as_of - timedelta(days=1)) if status == "paid" else None
        invoices.append(Invoice(number=f"S-{n}", customer_email="ann@example.test", currency=rng.choice(["EUR", "USD"]),
                                amount_due=100, issued_on=due - timedelta(days=30), due_on=due, status=status,
                                paid_on=paid))
        for stage in (-3, 1, 7, 14):
            day = due + timedelta(days=stage + rng.choice([0, 0, 0, 1, 2]))
            if day < as_of and rng.random() < 0.6:
                sent.append((f"S-{n}", stage, day))
    rt.service.upsert([Customer(email="ann@example.test", name="Ann")], invoices)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    with rt.store.transaction() as tx:
        for number, stage, day in sent:
            tx.execute(_sql(rt.store, "INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, "
                                      "updated_at, sent_at) SELECT id, ?, 'sent', ?, ?, ?, ? FROM invoices "
                                      "WHERE number = ?"), (stage, day, at, at, at, number))


def _stored(rt: Runtime, params: RunParams) -> list[object]:
    run_id = request_run(rt.store, params, clock=rt.clock, source=SOURCE)
    assert run_id is not None
    done = compute_run(rt.store, run_id, clock=rt.clock)
    assert done is not None
    run = newest_run(rt.store, params)
    assert run is not None and run.id == run_id and run.rows == done.rows
    return list(run.rows)


@pytest.mark.parametrize("book", ["hand", "random"])
def test_a_stored_run_has_the_live_reports_rows(rt: Runtime, book: str) -> None:
    if book == "hand":
        seed(rt.service, rt.store)
        cases = [(JAN, APR, AS_OF, None), (MAR, MAR, AS_OF, "USD"), (FEB, MAR, AS_OF, "EUR"),
                 (JAN, APR, date(2026, 3, 9), None)]
    else:
        _random_book(rt, 5)
        cases = [(JAN, FEB, date(2026, 3, 20), None), (JAN, FEB, date(2026, 3, 20), "EUR"),
                 (Month(2025, 12), MAR, date(2026, 2, 1), "USD")]
    for first, last, as_of, currency in cases:
        live = stage_effectiveness(rt.store, first=first, last=last, as_of=as_of, currency=currency)
        assert live, "the case exercises some stage"
        assert _stored(rt, RunParams(first=first, last=last, as_of=as_of, currency=currency)) == live


def test_a_payment_and_a_send_committed_while_a_run_computes_are_wholly_out_of_it(rt: Runtime, db_url: str) -> None:
    seed(rt.service, rt.store)
    params = RunParams(first=JAN, last=APR, as_of=AS_OF)
    before = stage_effectiveness(rt.store, first=JAN, last=APR, as_of=AS_OF)
    run_id = request_run(rt.store, params, clock=rt.clock, source=SOURCE)
    assert run_id is not None
    other = open_store(db_url)  # a second connection: another process's writes
    committed_at: list[datetime] = []

    def between_reads(name: str) -> None:
        if name != "report_stage_effectiveness" or committed_at:
            return
        committed_at.append(datetime.now(UTC))
        with other.transaction() as tx:  # C (open, stage 1 sent 02-01) paid on 02-03; E's stage 7 sent on 03-29
            tx.execute(_sql(other, "UPDATE invoices SET status = 'paid', paid_on = ?, paid_at = ? WHERE number = ?"),
                       (date(2026, 2, 3), datetime(2026, 2, 3, 12, tzinfo=UTC), "C"))
            at = datetime(2026, 3, 29, 9, tzinfo=UTC)
            tx.execute(_sql(other, "INSERT INTO reminders (invoice_id, stage, state, business_date, created_at, "
                                   "updated_at, sent_at) SELECT id, 7, 'sent', ?, ?, ?, ? FROM invoices "
                                   "WHERE number = ?"), (date(2026, 3, 29), at, at, at, "E"))

    rt.store.before_statement = between_reads
    try:
        run = compute_run(rt.store, run_id, clock=rt.clock)
    finally:
        rt.store.before_statement = None
        other.close()
    assert committed_at, "the other connection committed between the run's snapshot and its report read"
    after = stage_effectiveness(rt.store, first=JAN, last=APR, as_of=AS_OF)
    assert after != before  # the commit changes the report ...
    assert run is not None and run.rows == before  # ... and none of it is in the run
    stored = newest_run(rt.store, params)
    assert stored is not None and stored.rows == before
    # Its instant is the snapshot's: taken before the other connection committed (same host's clock).
    assert stored.snapshot_at <= committed_at[0]
    assert committed_at[0] - stored.snapshot_at < timedelta(seconds=60)
    # The run's job (still queued: compute_run was called directly above) computes it again, commit and all.
    Worker(rt.app, rt.store, clock=rt.clock).drain()
    again = newest_run(rt.store, params)
    assert again is not None and again.id == run_id and again.rows == after and again.snapshot_at > committed_at[0]


def test_two_requests_queue_one_run_and_a_worker_computes_it(rt: Runtime) -> None:
    seed(rt.service, rt.store)
    params = RunParams(first=JAN, last=APR, as_of=AS_OF)
    first = request_run(rt.store, params, clock=rt.clock, source=SOURCE)
    assert first is not None and run_pending(rt.store, params)
    assert request_run(rt.store, params, clock=rt.clock, source=SOURCE) is None  # its job holds the unique key
    other = RunParams(first=JAN, last=APR, as_of=AS_OF, currency="EUR")
    assert request_run(rt.store, other, clock=rt.clock, source=SOURCE) is not None  # another parameter set
    queue = Queue(rt.store, clock=rt.clock, source=SOURCE)
    assert len(queue.list_jobs(task=RUN_TASK)) == 2
    assert newest_run(rt.store, params) is None
    Worker(rt.app, rt.store, clock=rt.clock).drain()
    run = newest_run(rt.store, params)
    assert run is not None and run.id == first and not run_pending(rt.store, params)
    assert run.rows == stage_effectiveness(rt.store, first=JAN, last=APR, as_of=AS_OF)
    assert {j["state"] for j in queue.list_jobs(task=RUN_TASK)} == {"completed"}
    # Finished: the key is free again.
    assert request_run(rt.store, params, clock=rt.clock, source=SOURCE) is not None


def test_the_scan_asks_for_the_default_ranges_run_of_its_business_date(rt: Runtime) -> None:
    seed(rt.service, rt.store)
    clock = ClockProcess(rt.app, rt.store, clock=rt.clock)
    clock.sync()
    fire = clock.trigger("reminders")
    assert fire.job_id is not None
    Worker(rt.app, rt.store, clock=rt.clock).drain()
    today = rt.clock.now().astimezone(rt.policy.zone).date()
    first, last = default_range(today, None, None)
    params = RunParams(first=first, last=last, as_of=today)
    run = newest_run(rt.store, params)
    assert run is not None
    assert run.rows == stage_effectiveness(rt.store, first=first, last=last, as_of=today)
    # A second scan of the same business date (a schedule every 15 minutes) asks for no second run.
    rt.clock.advance(15 * 60)
    assert clock.trigger("reminders").job_id is not None
    Worker(rt.app, rt.store, clock=rt.clock).drain()
    jobs = Queue(rt.store, clock=rt.clock, source=SOURCE).list_jobs(task=RUN_TASK)
    assert len(jobs) == 1, jobs
    assert newest_run(rt.store, params).id == run.id  # type: ignore[union-attr]


def test_a_snapshot_is_read_only_and_its_timeout_cancels_a_long_statement(rt: Runtime) -> None:
    if rt.store.backend != "postgres":
        with rt.store.snapshot(timeout_ms=1) as tx:  # SQLite: no statement timeout, one read transaction
            assert tx.execute("SELECT COUNT(*) AS n FROM invoices")[0]["n"] == 0
        return
    with pytest.raises(QueryTimedOut), rt.store.snapshot(timeout_ms=50) as tx:
        tx.execute("SELECT pg_sleep(2)")
    with pytest.raises(StoreError, match="read-only"), rt.store.snapshot() as tx:
        tx.execute("INSERT INTO report_runs (report, params_key, first_month, last_month, as_of, state, created_at) "
                   "VALUES ('stages', 'k', '2026-01', '2026-01', '2026-01-31', 'queued', now())")
    with rt.store.snapshot(timeout_ms=5000) as tx:  # within the budget: answers
        assert tx.execute("SELECT 1 AS one")[0]["one"] == 1


def test_a_run_whose_job_was_cancelled_is_not_pending_and_a_new_one_can_be_asked_for(rt: Runtime) -> None:
    params = RunParams(first=JAN, last=APR, as_of=AS_OF)
    run_id = request_run(rt.store, params, clock=rt.clock, source=SOURCE)
    assert run_id is not None and run_pending(rt.store, params)
    queue = Queue(rt.store, clock=rt.clock, source=SOURCE)
    [job] = queue.list_jobs(task=RUN_TASK)
    assert queue.cancel(int(job["id"]))  # an operator cancels it: the row stays "queued"
    assert not run_pending(rt.store, params)
    assert request_run(rt.store, params, clock=rt.clock, source=SOURCE) not in (None, run_id)
    assert run_pending(rt.store, params)
