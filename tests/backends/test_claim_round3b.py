"""The claim's CPU per job, round 3b (issue 27 item 2): what the cheaper claim path must keep.

- ``Queue.claim`` builds each Job through its slot setters: it must be the Job ``Job(**fields)`` makes from the
  row (frozen still), on both backends, and a claim still commits the completions it carries.
- PostgreSQL's JSON loader (a str to json.loads; {} and [] without it) reads what psycopg's read.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta

import pytest

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
    assert [name for name in seen if name != "queue_limit_names"] == ["complete_jobs", "claim_jobs"]
    assert {queue.get(j.id).state for j in first} == {"completed"}  # type: ignore[union-attr]
    assert {queue.get(j.id).state for j in second} == {"running"}  # type: ignore[union-attr]


@pytest.mark.postgres
def test_the_json_loader_reads_what_psycopg_reads(pg_db_url: str) -> None:
    with open_store(pg_db_url) as store, store.transaction() as tx:
        row = tx.execute("SELECT CAST('{}' AS jsonb) AS a, CAST('[]' AS jsonb) AS b, CAST(%(j)s AS jsonb) AS c, "
                         "CAST('null' AS jsonb) AS d, CAST('\"é\"' AS json) AS e, CAST('1.5' AS jsonb) AS f",
                         {"j": '{"x": [1, {"y": "ü"}], "z": null}'})[0]
        assert row == {"a": {}, "b": [], "c": {"x": [1, {"y": "ü"}], "z": None}, "d": None, "e": "é", "f": 1.5}
        again = tx.execute("SELECT CAST('{}' AS jsonb) AS a")[0]["a"]
        assert again == {} and again is not row["a"]  # a new object each time
