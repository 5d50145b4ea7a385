"""SQLite's writer lock on real OS processes: ``flock`` on ``<db>-lock`` hands the write lock over (issue 14).

Two worker processes on one SQLite file must both complete jobs (a waiter is woken when the lock is
released, it does not sleep in SQLite's busy handler while the other keeps the lock); a process killed
with ``kill -9`` in the middle of a transaction must not keep the lock from anyone, and a wait for a
holder that never lets go ends after ``busy_timeout`` with a transient error, as SQLite's own would.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import flock_held_elsewhere
from oncebeat.errors import TransientStoreError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue, all_jobs
from oncebeat.store import Store, open_store
from oncebeat.timebase import SystemClock

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"
PROCS = Path(__file__).resolve().parent / "procs"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path}/oncebeat.db"
    store = open_store(url)
    store.migrate()
    yield url, store
    store.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``procs/<script>`` with this checkout's ``src`` first on the path; killed at teardown if running."""
    children: list[subprocess.Popen[str]] = []

    def start(script: str, *args: str) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
        env.pop("ONCEBEAT_CRASH_AT", None)
        err = (tmp_path / f"{script}-{len(children)}.err").open("w")
        child = subprocess.Popen([sys.executable, str(PROCS / script), *args], env=env, stdout=subprocess.PIPE,
                                 stderr=err, text=True)
        err.close()
        children.append(child)
        return child

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)
        if child.stdout:
            child.stdout.close()


def wait_for(what: str, predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def unfinished(url: str) -> int:
    """Jobs not finished, read as a plain SQLite reader: reading never needs the writer lock."""
    conn = sqlite3.connect(f"file:{url.removeprefix('sqlite:///')}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE state IN ('available', 'running')").fetchone()[0])
    finally:
        conn.close()


def ready_workers(spawn: Callable[..., subprocess.Popen[str]], url: str, rendezvous: Path,
                  count: int) -> list[subprocess.Popen[str]]:
    """``count`` worker processes, registered and waiting for ``rendezvous/go``."""
    rendezvous.mkdir()
    workers = [spawn("noop_worker.py", url, str(rendezvous)) for _ in range(count)]
    wait_for("the workers to be ready", lambda: len(list(rendezvous.glob("ready-*"))) == count, 30)
    return workers


def stop(workers: list[subprocess.Popen[str]]) -> list[dict[str, int]]:
    for w in workers:
        w.send_signal(signal.SIGTERM)
    results = []
    for w in workers:
        out, _ = w.communicate(timeout=30)
        assert w.returncode == 0
        results.append(json.loads(out.splitlines()[-1]))
    return results


def test_two_worker_processes_on_one_sqlite_file_both_complete_jobs(
        db: tuple[str, Store], spawn: Callable[..., subprocess.Popen[str]], tmp_path: Path) -> None:
    url, store = db
    jobs = 4000
    Queue(store, clock=SystemClock(), source=current_source("api")).enqueue_many([{"task": "noop"}] * jobs)

    workers = ready_workers(spawn, url, tmp_path / "rendezvous", 2)
    (tmp_path / "rendezvous" / "go").touch()
    wait_for("the queue to drain", lambda: unfinished(url) == 0, 120)
    results = stop(workers)

    assert sum(r["processed"] for r in results) == jobs
    assert all(r["processed"] > 0 for r in results), results  # the second process was not shut out
    completed_by = {row["worker_id"] for row in all_jobs(store, state="completed")}
    assert completed_by == {r["worker_id"] for r in results}


def test_a_process_killed_while_holding_the_write_lock_does_not_block_the_others(
        db: tuple[str, Store], spawn: Callable[..., subprocess.Popen[str]], tmp_path: Path) -> None:
    url, store = db
    jobs = 200
    Queue(store, clock=SystemClock(), source=current_source("api")).enqueue_many([{"task": "noop"}] * jobs)
    workers = ready_workers(spawn, url, tmp_path / "rendezvous", 1)
    holder = spawn("lock_holder.py", url)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    lock_file = tmp_path / "oncebeat.db-lock"
    assert flock_held_elsewhere(lock_file), "the holder holds the writer lock file"

    impatient = open_store(f"{url}?busy_timeout=0.3")  # a wait for a live holder ends after busy_timeout
    try:
        with pytest.raises(TransientStoreError, match="database is locked"), impatient.transaction():
            pass
    finally:
        impatient.close()

    (tmp_path / "rendezvous" / "go").touch()  # the worker now waits for the lock the holder keeps
    time.sleep(0.5)
    assert unfinished(url) == jobs, "nothing was claimed while the holder lived"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)

    wait_for("the worker to drain the queue after the kill", lambda: unfinished(url) == 0, 30)
    [result] = stop(workers)
    assert result["processed"] == jobs  # the holder's uncommitted cancel was rolled back: every job ran
    assert not flock_held_elsewhere(lock_file)
