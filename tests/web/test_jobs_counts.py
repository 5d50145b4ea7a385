# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The job list's counts per state stop at a cap (issue 27 item 5, docs/benchmarks.md round 3c): exact below it,
"10,000+" beyond, equal to the exact counts for jobs brought to every state through the queue's own verbs, and
read through indexes only (jobs_count_plan), on both backends. SQLite's plan must not need
``jobs_state_id_resting`` (engine 0014 drops it there), so the SQLite plan is checked without it."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat import processes
from oncebeat.provenance import current_source
from oncebeat.queue import JOB_STATES, Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.store import Store


def _every_state(runtime: Runtime) -> Queue:
    """Jobs in each state, on two queues, each brought there by the queue's verbs (as a worker and an operator
    would): 3 + 2 available, 2 scheduled, 1 running, 2 retryable, 3 discarded, 4 completed, 2 cancelled, 1 in doubt."""
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("api"))
    wid = processes.register(runtime.store, role="worker", source=current_source("worker"), clock=runtime.clock)

    def claimed(queue: str = "q1") -> object:
        q.enqueue("reminders.scan", queue=queue, max_attempts=3)
        [job] = q.claim(wid, queues=[queue])
        return job

    for _ in range(4):
        q.complete(wid, [claimed().id])  # type: ignore[attr-defined]
    for _ in range(3):
        assert q.fail(claimed("q2"), wid, "boom", permanent=True) == "discarded"  # type: ignore[arg-type]
    for _ in range(2):
        assert q.fail(claimed(), wid, "boom") == "retryable"  # type: ignore[arg-type]
    assert q.hold_in_doubt(claimed(), wid, ["effect-1"]) == "in_doubt"  # type: ignore[arg-type]
    claimed("q2")  # running
    for _ in range(2):
        job_id = q.enqueue("reminders.scan", queue="q1")
        assert job_id is not None and q.cancel(job_id)
    later = runtime.clock.now() + timedelta(days=1)
    for queue in ("q1", "q2"):
        q.enqueue("reminders.scan", queue=queue, run_at=later)
    for _ in range(3):
        q.enqueue("reminders.scan", queue="q1")
    for _ in range(2):
        q.enqueue("reminders.scan", queue="q2")
    return q


def test_capped_counts_equal_the_exact_counts_below_the_cap_and_stop_above_it(runtime: Runtime) -> None:
    q = _every_state(runtime)
    exact = q.counts()
    assert exact == {"available": 5, "scheduled": 2, "running": 1, "retryable": 2, "discarded": 3, "completed": 4,
                     "cancelled": 2, "in_doubt": 1}
    assert q.counts_capped(100) == {s: {"n": exact.get(s, 0), "capped": False} for s in JOB_STATES}
    for cap in (1, 2, 3, 4):
        assert q.counts_capped(cap) == {s: {"n": min(exact[s], cap + 1), "capped": exact[s] > cap}
                                        for s in JOB_STATES}, cap


def test_the_jobs_page_shows_counts_beyond_the_cap_as_more_than(runtime: Runtime,
                                                               dashboard_client: Callable[..., TestClient]) -> None:
    q = _every_state(runtime)
    q.enqueue_many([{"task": "reminders.scan", "queue": "q3"}] * 10_000)
    page = dashboard_client().get("/jobs").text
    counts = dict((state, n) for n, state in re.findall(r"<b>([0-9,+]+)</b> ([a-z_]+)</a>", page))
    assert counts == {"available": "10,000+", "scheduled": "2", "running": "1", "retryable": "2", "discarded": "3",
                      "completed": "4", "cancelled": "2", "in_doubt": "1"}
    assert "10,000+" in dashboard_client().get("/jobs?part=counts").text


def _plan(store: Store, name: str) -> str:
    """The plan of named query ``name`` (cap 10,001), the planner told to avoid sequential scans on PostgreSQL
    (an index path must exist; with a few rows it would rightly prefer reading the table)."""
    with store.transaction() as tx:
        if store.backend == "postgres":
            tx.execute("SET LOCAL enable_seqscan = off")
            rows = tx.execute("EXPLAIN " + store.query_sql(name), {"cap": 10_001})
            return "\n".join(str(r["QUERY PLAN"]) for r in rows)
        rows = tx.execute("EXPLAIN QUERY PLAN " + store.query_sql(name), {"cap": 10_001})
        return "\n".join(str(r["detail"]) for r in rows)


def test_jobs_count_plan_reads_bounded_index_ranges(runtime: Runtime) -> None:
    store = runtime.store
    _every_state(runtime)
    if store.backend == "sqlite":  # as engine 0014 leaves SQLite: no state index (whatever the schema's history)
        with store.transaction() as tx:
            tx.execute("DROP INDEX IF EXISTS jobs_state_id_resting")
    for name in ("count_finished_jobs_capped", "count_unfinished_jobs_capped"):
        plan = _plan(store, name)
        if store.backend == "postgres":
            assert "Seq Scan on jobs" not in plan, plan
            assert plan.count("Limit") >= (4 if name == "count_finished_jobs_capped" else 1), plan
        else:
            scans = [line for line in plan.splitlines() if re.search(r"\b(SCAN|SEARCH) (jobs|j)\b", line)]
            assert scans, plan
            assert all("USING" in line for line in scans), plan  # an index, never the whole table
    finished = _plan(store, "count_finished_jobs_capped")
    assert ("jobs_finished_at" in finished) and ("jobs_in_doubt" in finished), finished
