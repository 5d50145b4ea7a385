"""The store contract: every backend passes the same queue and migration tests.

Run against SQLite and PostgreSQL through the ``backend`` fixture. Time is a
:class:`SimulatedClock`, so backoffs and lease expiries are exact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.provenance import current_source
from oncebeat.queue import Queue, all_jobs
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import load_migrations, registered_lines
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import register_process

SRC = Path(__file__).resolve().parents[2] / "src"


def make_queue(store: Store, clock: SimulatedClock) -> Queue:
    return Queue(store, clock=clock, source=current_source("api"))


def new_worker_id(store: Store, clock: SimulatedClock) -> int:
    return register_process(store, role="worker", source=current_source("worker"), clock=clock)


def events(store: Store, clock: SimulatedClock, *, subject: str | None = None,
           kind: str | None = None) -> list[dict[str, Any]]:
    return store.read("list_events", subject=subject, kind=kind, since=clock.now() - timedelta(days=365))


def insert_customer_sql(store: Store) -> str:
    placeholder = "?" if store.backend == "sqlite" else "%s"
    return f"INSERT INTO customers (email, name) VALUES ({placeholder}, {placeholder})"


# --- migrations -------------------------------------------------------------------------------


# Every migration of both SQL lines (the engine's, then the reminder app's), as migrate() reports them.
ALL_MIGRATIONS = [(line.name, v) for line in registered_lines() for v, _, _ in load_migrations("sqlite", line)]
VERSIONS = {line: [v for name, v in ALL_MIGRATIONS if name == line] for line, _ in ALL_MIGRATIONS}


def test_migrating_a_migrated_store_again_changes_nothing(store: Store) -> None:
    before = store.table_columns()
    assert store.migrate() == []
    assert store.migrate() == []
    assert store.schema_versions() == VERSIONS
    assert store.table_columns() == before


def test_fresh_store_migration_applies_every_version_once(db_url: str) -> None:
    assert set(VERSIONS) == {"engine", "reminders"}
    with open_store(db_url) as fresh:
        assert fresh.applied_migrations() == [] and fresh.schema_versions() == {}
        assert fresh.migrate() == ALL_MIGRATIONS
        assert fresh.schema_versions() == VERSIONS


def test_concurrent_migrations_from_many_connections_apply_each_version_once(db_url: str) -> None:
    stores = [open_store(db_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    applied: list[list[tuple[str, int]]] = []
    errors: list[BaseException] = []

    def migrate(s: Store) -> None:
        try:
            barrier.wait(timeout=10)
            applied.append(s.migrate())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert sorted(v for versions in applied for v in versions) == sorted(ALL_MIGRATIONS)
        assert stores[0].schema_versions() == VERSIONS
    finally:
        for s in stores:
            s.close()


MIGRATE_AT_ONCE = """
import json, sys, time
import oncebeat.reminders  # registers the reminder app's SQL line, as the CLI does
from oncebeat.store import open_store
store = open_store(sys.argv[1])  # opening is lazy for SQLite: the first connection is made by migrate()
while time.time() < float(sys.argv[2]):
    time.sleep(0.0005)
print(json.dumps(store.migrate()))
store.close()
"""


def test_concurrent_migrations_from_many_processes_apply_each_version_once(db_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    go_at = time.time() + 1.0  # all four have started by then; then they migrate at once
    procs = [subprocess.Popen([sys.executable, "-c", MIGRATE_AT_ONCE, db_url, f"{go_at:.6f}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outputs]
    assert sorted(tuple(v) for out, _ in outputs for v in json.loads(out)) == sorted(ALL_MIGRATIONS)
    with open_store(db_url) as s:
        assert s.schema_versions() == VERSIONS


# --- enqueue, claim, complete ------------------------------------------------------------------


def test_enqueued_job_is_claimed_with_a_lease_and_completed(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("send", {"to": "a@example.com"})
    assert job_id is not None
    assert q.get(job_id).state == "available"

    [job] = q.claim(wid, lease_seconds=30)
    assert (job.id, job.state, job.attempt, job.worker_id) == (job_id, "running", 1, wid)
    assert job.args == {"to": "a@example.com"}
    assert job.lease_expires_at == sim_clock.now() + timedelta(seconds=30)
    assert job.source_kind == "api"

    q.complete(wid, [job_id])
    done = q.get(job_id)
    assert done.state == "completed"
    assert done.finished_at == sim_clock.now()
    assert done.lease_expires_at is None
    assert q.claim(wid) == []
    assert q.counts() == {"completed": 1}


def test_only_the_lease_holder_can_complete_a_job(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    holder, other = new_worker_id(store, sim_clock), new_worker_id(store, sim_clock)
    job_id = q.enqueue("send")
    q.claim(holder)
    q.complete(other, [job_id])
    assert q.get(job_id).state == "running"


def test_claim_takes_lowest_priority_number_first_then_oldest_run_at(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    early = sim_clock.now() - timedelta(minutes=10)
    late_low = q.enqueue("t", {"n": "late, priority 5"}, priority=5)
    early_low = q.enqueue("t", {"n": "early, priority 5"}, priority=5, run_at=early)
    urgent = q.enqueue("t", {"n": "urgent"}, priority=-1)
    normal = q.enqueue("t", {"n": "normal"}, priority=0)

    first_two = q.claim(wid, limit=2)
    assert [j.id for j in first_two] == [urgent, normal]
    rest = q.claim(wid, limit=10)
    assert [j.id for j in rest] == [early_low, late_low]


def test_scheduled_job_is_not_claimed_before_its_run_at(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("later", run_at=sim_clock.now() + timedelta(minutes=5))
    assert q.get(job_id).state == "scheduled"
    assert q.next_run_at() == sim_clock.now() + timedelta(minutes=5)

    sim_clock.advance(299)
    assert q.claim(wid) == []
    sim_clock.advance(1)
    assert [j.id for j in q.claim(wid)] == [job_id]


def test_enqueue_refuses_naive_run_at(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    with pytest.raises(ValueError, match="timezone-aware"):
        q.enqueue("t", run_at=sim_clock.now().replace(tzinfo=None))


def test_second_unfinished_job_with_same_unique_key_is_refused(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    first = q.enqueue("scan", unique_key="scan:2026-03-01")
    assert first is not None
    assert q.enqueue("scan", unique_key="scan:2026-03-01") is None

    q.claim(wid)
    assert q.enqueue("scan", unique_key="scan:2026-03-01") is None, "a running job still holds its key"

    q.complete(wid, [first])
    second = q.enqueue("scan", unique_key="scan:2026-03-01")
    assert second is not None and second != first
    assert q.counts() == {"available": 1, "completed": 1}


def test_enqueue_many_skips_unique_key_conflicts(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    q.enqueue_many([{"task": "t", "unique_key": "k1"}, {"task": "t", "unique_key": "k1"},
                    {"task": "t", "unique_key": "k2"}, {"task": "t"}])
    assert q.counts() == {"available": 3}


@pytest.mark.parametrize("keyed", [True, False], ids=["a unique key in the batch", "no unique key"])
def test_enqueue_many_inserts_the_rows_enqueue_would(store: Store, sim_clock: SimulatedClock, keyed: bool) -> None:
    """Defaults (the app's per task, the queue's otherwise), state, run_at, keys and provenance: row for row."""
    app = App()
    app.task("mailer", queue="mail", priority=3, max_attempts=5)(lambda ctx: None)
    app.task("t")(lambda ctx: None)
    q = Queue(store, clock=sim_clock, source=current_source("api"), app=app)
    now = sim_clock.now()
    specs: list[dict[str, Any]] = [
        {"task": "t"},
        {"task": "mailer", "args": {"to": "a@example.com", "n": [1, 2]}},
        {"task": "mailer", "queue": "bulk", "priority": -1, "max_attempts": 1},
        {"task": "t", "run_at": now + timedelta(minutes=5), **({"unique_key": "later"} if keyed else {})},
        {"task": "t", "run_at": now - timedelta(hours=1), "occurrence_id": 42},
        {"task": "t", "run_at": now, "args": {}},
    ]
    singles = [q.enqueue(**spec) for spec in specs]
    with store.transaction() as tx:
        tx.execute("UPDATE jobs SET state = 'completed', finished_at = created_at")  # frees "later"
    assert q.enqueue_many(specs) == len(specs)
    rows = sorted(all_jobs(store), key=lambda r: r["id"])
    assert [r["id"] for r in rows[: len(specs)]] == singles
    skip = {"id", "state", "finished_at"}
    for one, many in zip(rows[: len(specs)], rows[len(specs):], strict=True):
        assert {k: v for k, v in many.items() if k not in skip} == {k: v for k, v in one.items() if k not in skip}
    assert [r["state"] for r in rows[len(specs):]] == ["available", "available", "available", "scheduled",
                                                        "available", "available"]
    assert [r["queue"] for r in rows[len(specs):]] == ["default", "mail", "bulk", "default", "default", "default"]


def test_enqueue_many_refuses_what_enqueue_refuses(store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    app.task("t")(lambda ctx: None)
    q = Queue(store, clock=sim_clock, source=current_source("api"), app=app)
    with pytest.raises(ValueError, match="no task named 'nope'"):
        q.enqueue_many([{"task": "t"}, {"task": "nope"}])
    with pytest.raises(ValueError, match="max_attempts"):
        q.enqueue_many([{"task": "t", "max_attempts": 0}])
    with pytest.raises(ValueError, match="naive"):
        q.enqueue_many([{"task": "t", "run_at": sim_clock.now().replace(tzinfo=None)}])
    assert q.counts() == {}, "a refused batch inserts nothing"


def test_enqueue_in_caller_transaction_rolls_back_with_it(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    with pytest.raises(RuntimeError, match="business write failed"):
        with store.transaction() as tx:
            tx.execute(insert_customer_sql(store), ("ann@example.com", "Ann"))
            assert q.enqueue("welcome", {"email": "ann@example.com"}, tx=tx) is not None
            raise RuntimeError("business write failed")
    assert q.counts() == {}
    with store.transaction() as tx:
        assert tx.execute("SELECT COUNT(*) AS n FROM customers") == [{"n": 0}]


def test_enqueue_in_caller_transaction_commits_with_it(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    with store.transaction() as tx:
        tx.execute(insert_customer_sql(store), ("bob@example.com", "Bob"))
        q.enqueue("welcome", {"email": "bob@example.com"}, tx=tx)
    assert q.counts() == {"available": 1}
    with store.transaction() as tx:
        assert tx.execute("SELECT COUNT(*) AS n FROM customers") == [{"n": 1}]


def test_claim_takes_at_most_the_batch_limit(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    q.enqueue_many([{"task": "t", "args": {"i": i}} for i in range(25)])
    assert [len(q.claim(wid, limit=10)) for _ in range(4)] == [10, 10, 5, 0]


def test_concurrent_claimers_never_get_the_same_job(store: Store, sim_clock: SimulatedClock) -> None:
    total, claimers = 2000, 4
    make_queue(store, sim_clock).enqueue_many([{"task": "t", "args": {"i": i}} for i in range(total)])
    claimed: list[list[int]] = [[] for _ in range(claimers)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(claimers)

    def claim_until_empty(slot: int) -> None:
        try:
            q = make_queue(store, sim_clock)  # one Queue per claimer, as in separate workers
            wid = new_worker_id(store, sim_clock)
            barrier.wait(timeout=10)
            while batch := q.claim(wid, limit=25):
                claimed[slot].extend(j.id for j in batch)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim_until_empty, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    every_id = [i for ids in claimed for i in ids]
    assert len(every_id) == len(set(every_id)), "a job was claimed twice"
    assert len(every_id) == total
    assert make_queue(store, sim_clock).counts() == {"running": total}
    assert sum(1 for ids in claimed if ids) > 1, "the claimers did not actually run side by side"


# --- failures, retries, discards ----------------------------------------------------------------


def test_failed_job_is_retryable_after_backoff_and_keeps_its_errors(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("flaky", max_attempts=5)
    [job] = q.claim(wid)
    failed_at = sim_clock.now()
    assert q.fail(job, wid, "SMTP 451 try later") == "retryable"

    retry = q.get(job_id)
    assert retry.state == "retryable"
    assert failed_at + timedelta(seconds=1.6) <= retry.run_at <= failed_at + timedelta(seconds=2.4)
    assert retry.finished_at is None and retry.lease_expires_at is None
    assert q.claim(wid) == [], "not before the backoff has passed"

    sim_clock.advance(3)
    [again] = q.claim(wid)
    assert again.attempt == 2
    assert q.fail(again, wid, "connection reset") == "retryable"
    errors = q.get(job_id).errors
    assert [(e["attempt"], e["error"], e["kind"]) for e in errors] == [
        (1, "SMTP 451 try later", "error"), (2, "connection reset", "error")]
    assert errors[0]["at"] == failed_at.isoformat()
    retried = events(store, sim_clock, subject=f"job:{job_id}", kind="job.retried")
    assert [e["detail"]["attempt"] for e in retried] == [1, 2]


def test_job_out_of_attempts_is_discarded_with_every_error_kept(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("flaky", max_attempts=2)
    [job] = q.claim(wid)
    assert q.fail(job, wid, "boom 1") == "retryable"
    sim_clock.advance(10)
    [job] = q.claim(wid)
    assert q.fail(job, wid, "boom 2") == "discarded"

    discarded = q.get(job_id)
    assert discarded.state == "discarded"
    assert discarded.finished_at == sim_clock.now()
    assert [e["error"] for e in discarded.errors] == ["boom 1", "boom 2"]
    sim_clock.advance(3600)
    assert q.claim(wid) == []
    [event] = events(store, sim_clock, subject=f"job:{job_id}", kind="job.discarded")
    assert event["detail"]["error"] == "boom 2"


def test_permanent_failure_discards_at_once(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("send", max_attempts=20)
    [job] = q.claim(wid)
    assert q.fail(job, wid, "550 no such user", permanent=True) == "discarded"
    discarded = q.get(job_id)
    assert (discarded.state, discarded.attempt) == ("discarded", 1)
    assert discarded.errors[0]["error"] == "550 no such user"
    assert events(store, sim_clock, subject=f"job:{job_id}", kind="job.discarded")[0]["detail"]["permanent"] is True


def test_failure_reported_after_losing_the_lease_changes_nothing(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("slow")
    [job] = q.claim(wid, lease_seconds=30)
    sim_clock.advance(31)
    q.rescue()
    assert q.fail(job, wid, "too late") == "lost-lease"
    assert q.get(job_id).state == "available"


# --- leases and rescue ------------------------------------------------------------------------------


def test_job_of_a_dead_worker_is_rescued_after_its_lease_expires(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    dead = new_worker_id(store, sim_clock)
    job_id = q.enqueue("send", max_attempts=3)
    q.claim(dead, lease_seconds=30)

    sim_clock.advance(30)
    assert q.rescue() == [], "the lease has not expired yet"
    sim_clock.advance(1)
    [rescued] = q.rescue()
    assert (rescued["id"], rescued["state"], rescued["worker_id"]) == (job_id, "available", dead)

    job = q.get(job_id)
    assert job.state == "available" and job.lease_expires_at is None
    [error] = job.errors
    assert error["kind"] == "rescue" and error["attempt"] == 1
    assert f"worker {dead}" in error["error"]
    [event] = events(store, sim_clock, subject=f"job:{job_id}", kind="job.rescued")
    assert event["source_kind"] == "rescue"
    assert event["detail"]["dead_worker"] == dead

    survivor = new_worker_id(store, sim_clock)
    [again] = q.claim(survivor)
    assert (again.id, again.attempt) == (job_id, 2)


def test_rescued_job_out_of_attempts_is_discarded(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("send", max_attempts=1)
    q.claim(wid, lease_seconds=30)
    sim_clock.advance(31)
    [rescued] = q.rescue()
    assert rescued["state"] == "discarded"
    job = q.get(job_id)
    assert job.state == "discarded" and job.finished_at == sim_clock.now()
    assert job.errors[-1]["kind"] == "rescue"
    [event] = events(store, sim_clock, subject=f"job:{job_id}", kind="job.rescued")
    assert event["detail"]["new_state"] == "discarded"


def test_heartbeat_keeps_a_live_job_from_being_rescued(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("long")
    q.claim(wid, lease_seconds=30)
    for _ in range(5):
        sim_clock.advance(20)
        q.extend_leases(wid, [job_id], lease_seconds=30)
        assert q.rescue() == []
    assert q.get(job_id).lease_expires_at == sim_clock.now() + timedelta(seconds=30)


def test_returned_job_does_not_burn_an_attempt(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("long", max_attempts=1)
    q.claim(wid)
    assert q.return_jobs(wid, [job_id]) == [job_id]

    returned = q.get(job_id)
    assert (returned.state, returned.attempt, returned.worker_id, returned.errors) == ("available", 0, None, [])
    [event] = events(store, sim_clock, subject=f"worker:{wid}", kind="job.returned")
    assert event["detail"]["jobs"] == [job_id]
    [again] = q.claim(wid)
    assert again.attempt == 1, "max_attempts=1 still allows the one real attempt"


def test_only_the_holder_can_return_a_job(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    holder, other = new_worker_id(store, sim_clock), new_worker_id(store, sim_clock)
    job_id = q.enqueue("long")
    q.claim(holder)
    assert q.return_jobs(other, [job_id]) == []
    assert q.get(job_id).state == "running"


# --- cancel -----------------------------------------------------------------------------------------


def test_waiting_job_can_be_cancelled_and_is_never_claimed(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("send", run_at=sim_clock.now() + timedelta(hours=1))
    assert q.cancel(job_id) is True
    cancelled = q.get(job_id)
    assert cancelled.state == "cancelled" and cancelled.finished_at == sim_clock.now()
    assert len(events(store, sim_clock, subject=f"job:{job_id}", kind="job.cancelled")) == 1
    sim_clock.advance(7200)
    assert q.claim(wid) == []


@pytest.mark.parametrize("finish", ["claimed", "completed"])
def test_running_or_finished_job_cannot_be_cancelled(store: Store, sim_clock: SimulatedClock, finish: str) -> None:
    q = make_queue(store, sim_clock)
    wid = new_worker_id(store, sim_clock)
    job_id = q.enqueue("send")
    q.claim(wid)
    if finish == "completed":
        q.complete(wid, [job_id])
    assert q.cancel(job_id) is False
    assert q.get(job_id).state == ("running" if finish == "claimed" else "completed")
    assert events(store, sim_clock, subject=f"job:{job_id}", kind="job.cancelled") == []


# --- values -----------------------------------------------------------------------------------------


def test_instants_come_back_as_aware_utc(store: Store, sim_clock: SimulatedClock) -> None:
    q = make_queue(store, sim_clock)
    run_at = sim_clock.now() + timedelta(seconds=90, microseconds=123456)
    job = q.get(q.enqueue("t", {"nested": {"list": [1, 2], "text": "é"}}, run_at=run_at))
    assert job.run_at == run_at
    assert job.run_at.utcoffset() == timedelta(0)
    assert job.created_at == sim_clock.now()
    assert job.args == {"nested": {"list": [1, 2], "text": "é"}}
    assert job.errors == []



def test_a_sqlite_store_dropped_without_close_closes_its_connections(tmp_path: Path) -> None:
    import gc
    import warnings

    store = open_store(f"sqlite:///{tmp_path}/dropped.db")
    store.migrate()
    reader = threading.Thread(target=store.read, args=("list_schedules",))  # a second thread's own connection
    reader.start()
    reader.join()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del store
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
