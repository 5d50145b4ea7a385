"""A claim takes at most its limit, whatever plan PostgreSQL picks (issue 27 item 2).

The claim's pick (``SELECT ctid … LIMIT :limit FOR UPDATE SKIP LOCKED``) was a subquery in the UPDATE's FROM: a
join input the planner may rescan, and each rescan ran the LIMIT again past the rows the statement had already
updated, so a claim of 10 could take 25. As an ``ARRAY(…)`` sub-select it is an InitPlan, run once. The plan test
reads the JSON plan under planner settings that push towards each join method; the claim test runs the statement
under the same settings and counts what it took.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, open_store
from oncebeat.timebase import SystemClock

pytestmark = pytest.mark.postgres

# Each set switches the named planner methods off for one transaction (SET LOCAL), so the planner must pick
# among the rest: a nested loop, a hash join, a merge join, with or without a Materialize in between.
SETTINGS = [
    (),
    ("enable_tidscan",),
    ("enable_tidscan", "enable_hashjoin"),
    ("enable_tidscan", "enable_hashjoin", "enable_mergejoin"),
    ("enable_tidscan", "enable_hashjoin", "enable_mergejoin", "enable_material"),
    ("enable_hashjoin", "enable_mergejoin", "enable_material"),
]
JOBS = 3_000


@pytest.fixture
def pg_queue(pg_db_url: str) -> Iterator[tuple[Store, Queue]]:
    with open_store(pg_db_url) as store:
        store.migrate()
        queue = Queue(store, clock=SystemClock(), source=current_source("api"))
        queue.enqueue("t", {})
        with store.transaction() as tx:  # JOBS - 1 copies of that job, then fresh statistics
            tx.execute("INSERT INTO jobs (queue, task, args, priority, run_at, state, attempt, max_attempts, "
                       "created_at, source_kind, source_host, source_pid, source_name, source_version) "
                       "SELECT queue, task, args, priority, run_at, state, attempt, max_attempts, created_at, "
                       "source_kind, source_host, source_pid, source_name, source_version "
                       "FROM jobs, generate_series(2, %(n)s)", {"n": JOBS})
            tx.execute("ANALYZE jobs")
        yield store, queue


def _claim_params(queue: Queue, limit: int) -> dict[str, Any]:
    now = queue.clock.now()
    return {"queue": "default", "worker_id": 1, "now": now, "lease_expires_at": now + timedelta(seconds=30),
            "capped": 0, "limit": limit}


def _pick_parents(node: dict[str, Any], under: str = "") -> list[str]:
    """For each LockRows node (the pick), how the Update's child that holds it hangs on the Update."""
    found = [under] if node["Node Type"] == "LockRows" else []
    for child in node.get("Plans", []):
        found += _pick_parents(child, child.get("Parent Relationship", "") if node["Node Type"] == "ModifyTable"
                               else under)
    return found


@pytest.mark.parametrize("off", SETTINGS, ids=lambda s: "+".join(s) or "default")
def test_the_pick_runs_once_as_an_initplan(pg_queue: tuple[Store, Queue], off: tuple[str, ...]) -> None:
    store, queue = pg_queue
    with store.transaction() as tx:
        for name in off:
            tx.execute(f"SET LOCAL {name} = off")
        # Named query text, run by hand only to EXPLAIN it (test-only: no module runs another's SQL here).
        rows = tx.execute("EXPLAIN (FORMAT JSON) " + store.query_sql("claim_jobs"), _claim_params(queue, 10))
    plan = rows[0]["QUERY PLAN"]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    top = plan[0]["Plan"]
    assert (top["Node Type"], top["Operation"]) == ("ModifyTable", "Update")
    assert _pick_parents(top) == ["InitPlan"], json.dumps(plan, indent=1)


@pytest.mark.parametrize("off", SETTINGS, ids=lambda s: "+".join(s) or "default")
def test_a_claim_takes_at_most_its_limit(pg_queue: tuple[Store, Queue], off: tuple[str, ...]) -> None:
    store, queue = pg_queue
    taken: list[int] = []
    for limit in (1, 10, 100):
        with store.transaction() as tx:
            for name in off:
                tx.execute(f"SET LOCAL {name} = off")
            rows = tx.run("claim_jobs", **_claim_params(queue, limit))
        assert len(rows) == limit
        taken += [int(r["id"]) for r in rows]
    assert len(set(taken)) == len(taken) == 111
    with store.transaction() as tx:
        running = tx.execute("SELECT count(*) AS n FROM jobs WHERE state = 'running'")[0]["n"]
    assert running == 111
