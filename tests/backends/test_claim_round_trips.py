"""The claim's round trips, round 3b (issue 27 item 2): what the faster claim path must keep.

- ``Queue.claim`` of one unlimited queue runs its completions and its claim through ``Store.run_steps`` (on
  PostgreSQL one pipelined round trip: BEGIN, bounds, statements, COMMIT); the Jobs it hands out are the ones
  ``Job(**fields)`` builds from the row.
- ``run_steps`` is one transaction: a step that fails leaves nothing of the others.
- On PostgreSQL a dead pooled connection never costs a claim (BEGIN stays the liveness check), and a lock timeout
  inside the pipeline is raised as a transient error with the transaction rolled back.
- PostgreSQL's JSON loader (a str to json.loads, {} and [] without it) reads what psycopg's read.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import fields
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from conftest import _libpq_url
from oncebeat.errors import StoreError, TransientStoreError
from oncebeat.provenance import current_source
from oncebeat.queue import Job, Queue
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock, SystemClock

API = current_source("api")


def test_a_claimed_job_is_the_job_its_row_makes(store: Store, sim_clock: SimulatedClock) -> None:
    clock = sim_clock
    queue = Queue(store, clock=clock, source=API)
    ids = [queue.enqueue("t", {"n": n, "nested": {"list": [1, "é"]}}, priority=-n) for n in range(3)]
    claimed = queue.claim(7, limit=10, lease_seconds=30)
    assert [j.id for j in claimed] == ids[::-1]  # priority, then run_at, then id
    lease = clock.now() + timedelta(seconds=30)
    for job in claimed:
        record = queue.get(job.id)
        assert record is not None
        expected = Job(**{f.name: getattr(record, f.name) for f in fields(Job)})
        assert job == expected
        assert (job.state, job.worker_id, job.lease_expires_at) == ("running", 7, lease)
        assert type(job) is Job and job.args["nested"] == {"list": [1, "é"]}
    with pytest.raises(AttributeError):  # still frozen
        claimed[0].attempt = 5  # type: ignore[misc]


def test_the_claim_commits_the_completions_it_carries(store: Store) -> None:
    queue = Queue(store, clock=SystemClock(), source=API)
    for _ in range(4):
        queue.enqueue("t", {})
    first = queue.claim(1, limit=2)
    seen: list[str] = []
    store.before_statement = seen.append
    try:
        second = queue.claim(1, limit=2, complete=[j.id for j in first])
    finally:
        store.before_statement = None
    assert seen == ["complete_jobs", "claim_jobs"]
    assert {queue.get(j.id).state for j in first} == {"completed"}  # type: ignore[union-attr]
    assert {queue.get(j.id).state for j in second} == {"running"}  # type: ignore[union-attr]


def test_run_steps_is_one_transaction(store: Store) -> None:
    queue = Queue(store, clock=SystemClock(), source=API)
    job_id = queue.enqueue("t", {})
    assert job_id is not None
    got = store.run_steps([("count_jobs_by_state", {}), ("get_job", {"id": job_id}), ("cancel_job", {
        "id": job_id, "now": SystemClock().now()})])
    assert got[0] == [{"state": "available", "n": 1}] and got[1][0]["id"] == job_id and got[2] == [{"id": job_id}]
    other = queue.enqueue("t", {})
    with pytest.raises(StoreError):  # the second step fails: nothing of the first one stays
        store.run_steps([("cancel_job", {"id": other, "now": SystemClock().now()}), ("no_such_query", {})])
    assert queue.get(other or 0).state == "available"  # type: ignore[union-attr]


def _tagged(url: str, tag: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path,
                       urlencode([*parse_qsl(parts.query), ("application_name", tag)]), parts.fragment))


@pytest.mark.postgres
def test_a_dead_pooled_connection_never_costs_a_pipelined_claim(pg_db_url: str) -> None:
    tag = f"ob_rt_{secrets.token_hex(4)}"
    with open_store(_tagged(pg_db_url, tag)) as store:
        store.migrate()
        queue = Queue(store, clock=SystemClock(), source=API)
        for _ in range(6):
            queue.enqueue("t", {})
        first = queue.claim(1, limit=3)
        hold = threading.Barrier(3)

        def use() -> None:  # three connections at once: the pool keeps three, all killed below
            with store.transaction() as tx:
                tx.execute("SELECT 1")
                hold.wait(timeout=10)

        threads = [threading.Thread(target=use) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with psycopg.connect(_libpq_url(pg_db_url), autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = %s", (tag,)).fetchone()
        assert row is not None and row[0] >= 3
        second = queue.claim(1, limit=3, complete=[j.id for j in first])  # no error: the next connection ran it
        assert len(second) == 3
        assert {queue.get(j.id).state for j in first} == {"completed"}  # type: ignore[union-attr]
        assert queue.counts() == {"completed": 3, "running": 3}


@pytest.mark.postgres
def test_a_lock_timeout_in_the_pipeline_is_transient_and_rolls_back(pg_db_url: str) -> None:
    url = pg_db_url + "&lock_timeout=200ms"
    with open_store(url) as store:
        store.migrate()
        queue = Queue(store, clock=SystemClock(), source=API)
        job_id = queue.enqueue("t", {})
        other = queue.enqueue("t", {})
        with store.transaction() as blocker:
            blocker.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (job_id,))
            with pytest.raises(TransientStoreError):
                store.run_steps([("cancel_job", {"id": other, "now": SystemClock().now()}),
                                 ("cancel_job", {"id": job_id, "now": SystemClock().now()})], bounded=True)
        assert queue.counts() == {"available": 2}  # the first cancel was rolled back with the transaction
        assert store.run_steps([("count_jobs_by_state", {})]) == [[{"state": "available", "n": 2}]]


@pytest.mark.postgres
def test_the_json_loader_reads_what_psycopg_reads(pg_db_url: str) -> None:
    with open_store(pg_db_url) as store, store.transaction() as tx:
        row = tx.execute("SELECT CAST('{}' AS jsonb) AS a, CAST('[]' AS jsonb) AS b, CAST(%(j)s AS jsonb) AS c, "
                         "CAST('null' AS jsonb) AS d, CAST('\"é\"' AS json) AS e, CAST('1.5' AS jsonb) AS f",
                         {"j": '{"x": [1, {"y": "ü"}], "z": null}'})[0]
        assert row == {"a": {}, "b": [], "c": {"x": [1, {"y": "ü"}], "z": None}, "d": None, "e": "é", "f": 1.5}
        again = tx.execute("SELECT CAST('{}' AS jsonb) AS a")[0]["a"]
        assert again == {} and again is not row["a"]  # a new object each time
