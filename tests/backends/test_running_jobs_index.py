"""PostgreSQL: a claim writes no entry into ``jobs_unfinished_queue`` (engine 0015, issue 27 target 2).

A claim turns a job's row into a new version that takes an entry in every index whose condition it meets (no update
of ``jobs`` can be HOT). Engine 0015 keeps only the unclaimed states in ``jobs_unfinished_queue`` on PostgreSQL, so
a claim writes two entries (the primary key, ``jobs_running_lease``) instead of three; the running jobs are counted
from ``jobs_running_lease``. Checked here: the index does not grow while a backlog is drained (it did on engine
0014), every count of unfinished jobs is exact on both backends, and the counts' plans read the lease index for the
running jobs and never the whole table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from oncebeat import processes
from oncebeat.pauses import queue_overview
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import ENGINE
from oncebeat.timebase import SystemClock

UNFINISHED = ("available", "scheduled", "running", "retryable")


def _sizes(store: Store) -> dict[str, int]:
    with store.transaction() as tx:
        rows = tx.execute("SELECT pg_relation_size('jobs_unfinished_queue') AS queue_index, "
                          "pg_relation_size('jobs_running_lease') AS lease_index")
    return {k: int(v) for k, v in rows[0].items()}


def _drain(store: Store, n: int) -> tuple[dict[str, int], dict[str, int]]:
    """Enqueue ``n`` jobs, then claim them all and complete them: the two indexes' sizes before and after."""
    q = Queue(store, clock=SystemClock(), source=current_source("api"))
    wid = processes.register(store, role="worker", source=current_source("worker"), clock=q.clock)
    for _ in range(n // 500):
        q.enqueue_many([{"task": "t"}] * 500)
    before = _sizes(store)
    done: list[int] = []
    while jobs := q.claim(wid, limit=100, complete=done):
        done = [j.id for j in jobs]
    q.complete(wid, done)
    assert q.counts() == {"completed": n}
    return before, _sizes(store)


@pytest.fixture
def pg_url(pg_db_url: str) -> str:
    return pg_db_url


@pytest.mark.postgres
def test_a_drain_writes_no_entry_into_the_queue_index_on_postgres(pg_url: str) -> None:
    with open_store(pg_url) as store:
        store.migrate(lines=(ENGINE,))
        before, after = _drain(store, 3000)
    assert after["queue_index"] == before["queue_index"]  # no entry added: not one page more
    assert after["lease_index"] > before["lease_index"]  # the claims' entries went to the lease index


@pytest.mark.postgres
def test_on_engine_0014_the_same_drain_grew_the_queue_index(pg_url: str) -> None:
    """The comparison above can fail: before engine 0015 every claimed job took an entry (queue, 'running')."""
    with open_store(pg_url) as store:
        store.migrate(target=14, lines=(ENGINE,))
        before, after = _drain(store, 3000)
    assert after["queue_index"] > before["queue_index"]


@pytest.fixture
def busy(store: Store) -> Iterator[tuple[Store, Queue]]:
    """Unfinished jobs in three queues, running ones in two of them, and finished ones beside them."""
    q = Queue(store, clock=SystemClock(), source=current_source("api"))
    wid = processes.register(store, role="worker", source=current_source("worker"), clock=q.clock)
    q.enqueue_many([{"task": "t", "queue": "a"}] * 5 + [{"task": "t", "queue": "b"}] * 6
                   + [{"task": "t", "queue": "c", "max_attempts": 3}] * 2)
    q.complete(wid, [j.id for j in q.claim(wid, queues=["a"], limit=1)])  # a: 1 completed
    q.claim(wid, queues=["a"], limit=2)  # a: 2 running, 2 available
    q.claim(wid, queues=["b"], limit=6)  # b: 6 running
    retry, _ = q.claim(wid, queues=["c"], limit=2)
    assert q.fail(retry, wid, "boom") == "retryable"  # c: 1 retryable, 1 running
    later = q.clock.now().replace(year=q.clock.now().year + 1)
    q.enqueue("t", queue="a", run_at=later)  # a: 1 scheduled
    q.enqueue("t", queue="d", run_at=later)  # d: 1 scheduled, nothing running
    yield store, q


def _truth(store: Store) -> Counter[tuple[str, str]]:
    with store.transaction() as tx:
        rows = tx.execute("SELECT queue, state FROM jobs")
    return Counter((str(r["queue"]), str(r["state"])) for r in rows if r["state"] in UNFINISHED)


def test_the_unfinished_counts_are_exact_with_running_jobs(busy: tuple[Store, Queue]) -> None:
    store, q = busy
    truth = _truth(store)
    assert truth == {("a", "available"): 2, ("a", "running"): 2, ("a", "scheduled"): 1, ("b", "running"): 6,
                     ("c", "retryable"): 1, ("c", "running"): 1, ("d", "scheduled"): 1}
    assert q.counts_by_queue() == [{"queue": queue, "state": state, "n": n}
                                   for (queue, state), n in sorted(truth.items())]
    for cap in (1, 2, 5, 6, 100):
        assert q.counts_by_queue_capped(cap) == [
            {"queue": queue, "state": state, "n": min(n, cap + 1), "capped": n > cap}
            for (queue, state), n in sorted(truth.items())], cap
    overview = {s.queue: (s.running, s.waiting) for s in queue_overview(store)}
    assert overview == {"a": (2, 3), "b": (6, 0), "c": (1, 1), "d": (0, 1)}
    for queue in "abcd":
        assert int(store.read("running_in_queue", queue=queue)[0]["n"]) == truth[(queue, "running")]


@pytest.mark.postgres
def test_the_counts_read_running_jobs_from_the_lease_index_on_postgres(pg_url: str) -> None:
    with open_store(pg_url) as store:
        store.migrate(lines=(ENGINE,))
        for name in ("count_unfinished_jobs_by_queue", "count_unfinished_jobs_capped", "queue_job_counts",
                     "running_in_queue"):
            with store.transaction() as tx:
                tx.execute("SET LOCAL enable_seqscan = off")  # an index path must exist (the table is empty)
                rows = tx.execute("EXPLAIN " + store.query_sql(name), {"cap": 10_001, "queue": "a"})
            plan = "\n".join(str(r["QUERY PLAN"]) for r in rows)
            assert "jobs_running_lease" in plan, (name, plan)
            assert "Seq Scan on jobs" not in plan, (name, plan)
