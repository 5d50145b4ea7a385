"""The claim is planned once per connection on PostgreSQL (issue 27 target 2, branch ``drain``).

``Queue.claim`` runs in ``store.transaction(generic_plans=True)``: ``plan_cache_mode = force_generic_plan`` for that
transaction only, so psycopg's prepared claim (prepared after 5 runs) is not planned again at every claim. A
generic plan is kept until the statistics of a table it reads change, so it must be the plan a claim wants
whatever the table held when it was made: ``jobs_fetch`` walked in order (no sort, no sequential scan) for the
pick, and the picked rows updated by their address (a Tid Scan), not found by reading the whole table. These
tests read the generic plan PostgreSQL makes (PREPARE, then EXPLAIN EXECUTE under the transaction's settings) on
an empty queue and on a 20,000-job backlog, and check that the setting ends with the transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, open_store
from oncebeat.timebase import SystemClock

pytestmark = pytest.mark.postgres

TYPES = {"worker_id": "bigint", "lease_expires_at": "timestamptz", "now": "timestamptz", "queue": "text",
         "capped": "integer", "limit": "integer"}


@pytest.fixture
def pg_store(pg_db_url: str) -> Iterator[Store]:
    with open_store(pg_db_url) as store:
        store.migrate()
        yield store


def _generic_plan(store: Store, queue: Queue) -> str:
    """EXPLAIN of claim_jobs' generic plan, in a transaction like the claim's."""
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    # Named query text, prepared by hand only to EXPLAIN it (test-only: no module runs another's SQL here).
    statement = re.sub(r"%\((\w+)\)s", number, store.query_sql("claim_jobs")).replace("%%", "%")
    now = queue.clock.now()
    # EXPLAIN EXECUTE takes no bound parameters: the values are literals (this test's own, no input)
    values = {"worker_id": "1", "lease_expires_at": f"'{(now + timedelta(seconds=30)).isoformat()}'",
              "now": f"'{now.isoformat()}'", "queue": "'default'", "capped": "0", "limit": "100"}
    with store.transaction(bounded=True, generic_plans=True) as tx:
        tx.execute(f"PREPARE claim_generic ({', '.join(TYPES[n] for n in names)}) AS {statement}")
        rows = tx.execute(f"EXPLAIN (COSTS OFF) EXECUTE claim_generic "
                          f"({', '.join(f'CAST({values[n]} AS {TYPES[n]})' for n in names)})")
        tx.execute("DEALLOCATE claim_generic")
    return "\n".join(str(next(iter(r.values()))) for r in rows)


def _assert_claim_plan(plan: str) -> None:
    assert "Index Scan using jobs_fetch on jobs" in plan, plan
    assert "Sort" not in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "Tid Scan on jobs" in plan, plan


def test_the_generic_plan_of_an_empty_queue_walks_jobs_fetch_and_updates_by_address(pg_store: Store) -> None:
    """Made on a fresh schema (no rows, no statistics), the plan a connection then keeps while the queue grows."""
    queue = Queue(pg_store, clock=SystemClock(), source=current_source("api"))
    _assert_claim_plan(_generic_plan(pg_store, queue))


def test_the_generic_plan_of_a_backlog_walks_jobs_fetch_in_order(pg_store: Store) -> None:
    queue = Queue(pg_store, clock=SystemClock(), source=current_source("api"))
    for _ in range(20):
        queue.enqueue_many([{"task": "t"}] * 1000)
    with pg_store.transaction() as tx:
        tx.execute("ANALYZE jobs")
    _assert_claim_plan(_generic_plan(pg_store, queue))


def test_the_claims_planner_settings_end_with_its_transaction(pg_store: Store) -> None:
    with pg_store.transaction(bounded=True, generic_plans=True) as tx:
        inside = tx.execute("SELECT current_setting('plan_cache_mode') AS mode, "
                            "current_setting('enable_seqscan') AS seqscan")[0]
    with pg_store.transaction() as tx:
        after = tx.execute("SELECT current_setting('plan_cache_mode') AS mode, "
                           "current_setting('enable_seqscan') AS seqscan")[0]
    assert inside == {"mode": "force_generic_plan", "seqscan": "off"}
    assert after == {"mode": "auto", "seqscan": "on"}


def test_claims_in_generic_plan_transactions_take_each_job_once(pg_db_url: str, pg_store: Store) -> None:
    """The claim as the worker runs it, past psycopg's prepare threshold, on one connection: every job once,
    batch by batch, with the claim prepared and run on its generic plan only."""
    with open_store(pg_db_url + "&pool_size=1") as store:
        queue = Queue(store, clock=SystemClock(), source=current_source("api"))
        queue.enqueue_many([{"task": "t", "args": {"n": n}} for n in range(1_000)])
        seen: list[int] = []
        done: list[int] = []
        while jobs := queue.claim(7, limit=30, complete=done):
            assert len(jobs) <= 30
            seen += [j.id for j in jobs]
            done = [j.id for j in jobs]
        queue.complete(7, done)
        with store.transaction() as tx:
            states = tx.execute("SELECT state, count(*) AS n FROM jobs GROUP BY state")
            prepared = tx.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                                  "WHERE statement LIKE '%%UPDATE jobs%%' AND statement LIKE '%%SKIP LOCKED%%'")
    assert len(seen) == len(set(seen)) == 1_000
    assert states == [{"state": "completed", "n": 1_000}]
    assert len(prepared) == 1 and prepared[0]["custom_plans"] == 0 and prepared[0]["generic_plans"] >= 25, prepared
