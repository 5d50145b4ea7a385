"""SQLite reads take no write lock (issue 27 item 3): a dashboard, the doctor or an idle worker polling for due
jobs reads a WAL snapshot while another process holds the write transaction, and never waits for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import open_store
from oncebeat.store.base import is_read_only as _is_read_only
from oncebeat.timebase import SystemClock

HOLD = textwrap.dedent("""
    import sys, time
    from oncebeat.store import open_store
    store = open_store(sys.argv[1])
    with store.transaction() as tx:           # the writer lock file and BEGIN IMMEDIATE, held
        tx.execute("UPDATE jobs SET priority = 5")
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
""")


def test_a_read_does_not_wait_for_another_process_writing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}?busy_timeout=20"
    store = open_store(url)
    store.migrate()
    Queue(store, clock=SystemClock(), source=current_source("cli")).enqueue("work")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, url, "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        rows = store.read("count_jobs_by_state")
        waited = time.monotonic() - started
        # The snapshot: the committed job, not the holder's uncommitted priority change.
        assert {r["state"]: r["n"] for r in rows} == {"available": 1}
        assert store.read("get_job", id=1)[0]["priority"] == 0
        assert waited < 1.0, f"a read waited {waited:.1f} s for the writer"
    finally:
        holder.wait(timeout=30)
        assert holder.stdout is not None
        holder.stdout.close()
        store.close()
    store = open_store(url)
    assert store.read("get_job", id=1)[0]["priority"] == 5  # committed when the holder ended
    store.close()


def test_a_write_through_a_read_verb_still_takes_the_write_lock() -> None:
    assert _is_read_only("SELECT * FROM jobs WHERE id = :id")
    assert _is_read_only("-- name: x\n-- a comment saying DELETE\nWITH a AS (SELECT 1) SELECT * FROM a")
    assert not _is_read_only("UPDATE jobs SET state = 'available' RETURNING id")
    assert not _is_read_only("WITH d AS (DELETE FROM jobs RETURNING id) SELECT count(*) FROM d")
    assert not _is_read_only("INSERT INTO jobs (task) VALUES ('x') RETURNING id")
    assert not _is_read_only("")
