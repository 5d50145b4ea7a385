"""PostgreSQL: a claimed job's new version stays on its page (engine 0016, ``jobs`` fillfactor 70, issue 27 target 2).

No update of a drained job can be HOT, but with room left on the page the new version is written beside the old one
(one WAL record, prefix/suffix-compressed) instead of on another page. Checked: after engine 0016 the first jobs of a
backlog keep their page when claimed; on engine 0015 (fillfactor 100) the same claim moved every one of them.
"""

from __future__ import annotations

import pytest

from oncebeat import processes
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, open_store
from oncebeat.store.sqlfiles import ENGINE
from oncebeat.timebase import SystemClock


def _pages(store: Store, ids: list[int]) -> dict[int, int]:
    with store.transaction() as tx:
        rows = tx.execute("SELECT id, (ctid::text::point)[0]::bigint AS page FROM jobs WHERE id = ANY(%(ids)s)",
                          {"ids": ids})
    return {int(r["id"]): int(r["page"]) for r in rows}


def _claim_first_ten(store: Store) -> tuple[dict[int, int], dict[int, int]]:
    """Enqueue 500 jobs, claim the first 10: their pages before and after the claim."""
    q = Queue(store, clock=SystemClock(), source=current_source("api"))
    wid = processes.register(store, role="worker", source=current_source("worker"), clock=q.clock)
    q.enqueue_many([{"task": "t"}] * 500)
    with store.transaction() as tx:
        first = [int(r["id"]) for r in tx.execute("SELECT id FROM jobs ORDER BY id LIMIT 10")]
    before = _pages(store, first)
    claimed = q.claim(wid, limit=10)
    assert sorted(j.id for j in claimed) == first
    return before, _pages(store, first)


@pytest.fixture
def pg_url(pg_db_url: str) -> str:
    return pg_db_url


@pytest.mark.postgres
def test_a_claimed_job_stays_on_its_page_on_postgres(pg_url: str) -> None:
    with open_store(pg_url) as store:
        store.migrate(lines=(ENGINE,))
        with store.transaction() as tx:
            options = tx.execute("SELECT reloptions FROM pg_class WHERE oid = 'jobs'::regclass")[0]["reloptions"]
        assert "fillfactor=70" in options
        before, after = _claim_first_ten(store)
    assert after == before


@pytest.mark.postgres
def test_on_engine_0015_the_same_claim_moved_every_job_off_its_page(pg_url: str) -> None:
    """The comparison above can fail: with full pages every new version went to another page."""
    with open_store(pg_url) as store:
        store.migrate(target=15, lines=(ENGINE,))
        before, after = _claim_first_ten(store)
    assert all(after[i] != before[i] for i in before)


@pytest.mark.postgres
def test_a_database_with_jobs_upgrades_to_0016_and_its_new_jobs_stay_on_their_page(pg_url: str) -> None:
    """0016 rewrites nothing: jobs enqueued before it keep their full pages; the ones enqueued after get the room."""
    with open_store(pg_url) as store:
        store.migrate(target=15, lines=(ENGINE,))
        q = Queue(store, clock=SystemClock(), source=current_source("api"))
        q.enqueue_many([{"task": "old"}] * 300)
        assert store.migrate(lines=(ENGINE,)) == [("engine", 16)]
        assert q.counts() == {"available": 300}
        wid = processes.register(store, role="worker", source=current_source("worker"), clock=q.clock)
        done: list[int] = []
        while jobs := q.claim(wid, limit=100, complete=done):  # the old backlog drains as before
            done = [j.id for j in jobs]
        q.complete(wid, done)
        assert q.counts() == {"completed": 300}
        before, after = _claim_first_ten_new(store, q, wid)
    assert after == before


def _claim_first_ten_new(store: Store, q: Queue, wid: int) -> tuple[dict[int, int], dict[int, int]]:
    q.enqueue_many([{"task": "new"}] * 500)
    with store.transaction() as tx:
        first = [int(r["id"]) for r in tx.execute("SELECT id FROM jobs WHERE task = 'new' ORDER BY id LIMIT 10")]
    before = _pages(store, first)
    assert sorted(j.id for j in q.claim(wid, limit=10)) == first
    return before, _pages(store, first)
