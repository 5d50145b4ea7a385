"""``oncebeat worker --burst`` as a cron-driven deployment runs it: real subprocesses on both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from oncebeat import App, Queue, SystemClock, current_source
from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"

JOBS = '''
from pathlib import Path

from oncebeat import App
from oncebeat.errors import Discard, Retry, Snooze

app = App()


@app.task()
def note(ctx, n: int) -> None:
    with (Path(__file__).parent / "ran.txt").open("a") as out:
        out.write(f"{n}\\n")


@app.task(max_attempts=1)
def hopeless(ctx) -> None:
    raise Discard("the order was cancelled")


@app.task(max_attempts=5)
def flaky(ctx) -> None:
    raise Retry("the partner API is down", delay=3600)

@app.task(max_attempts=1)
def capped(ctx) -> None:
    raise Snooze("cap: 2 notices this week", delay=3600)


@app.task()
def slow(ctx, n: int) -> None:
    import time
    here = Path(__file__).parent
    (here / f"started-{n}").write_text("")
    while (here / "hang").exists():  # the first worker hangs here until it is killed
        time.sleep(0.05)
    with (here / "ran.txt").open("a") as out:
        out.write(f"slow-{n}\\n")
'''


def _burst(tmp_path: Path, db_url: str, *more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", "worker", "--burst", "--app", "jobs:app",
                           "--db", db_url, *more], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300)


def test_burst_runs_what_is_due_then_exits_0_with_a_summary_and_leaves_later_jobs(tmp_path: Path,
                                                                                  db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    app = App()
    for name in ("note", "hopeless", "flaky", "capped"):
        app.task(name)(lambda ctx, **_: None)
    clock = SystemClock()
    with open_store(db_url) as store:
        store.migrate()
        queue = Queue(store, clock=clock, source=current_source("cli"), app=app)
        for n in range(5):
            queue.enqueue("note", {"n": n})
        queue.enqueue("note", {"n": 99}, run_at=clock.now() + timedelta(hours=1))  # not due: left for later
        queue.enqueue("hopeless")
        queue.enqueue("flaky")
        queue.enqueue("capped")  # a snooze (a cap, a fence): no failure, so not "retried" (a fresh-eyes finding)
    result = _burst(tmp_path, db_url)
    assert result.returncode == 0, result.stderr
    assert "burst done: 5 completed, 1 retried, 1 snoozed, 1 discarded, 0 in doubt" in result.stderr
    assert sorted((tmp_path / "ran.txt").read_text().split()) == ["0", "1", "2", "3", "4"]
    with open_store(db_url) as store:
        states = sorted(j["state"] for j in store.read("list_jobs", state=None, task=None, limit=100))
        assert states == ["completed"] * 5 + ["discarded", "retryable", "retryable", "scheduled"]  # flaky, capped
        workers = [p for p in store.read("list_processes") if p["role"] == "worker"]
        assert workers and all(p["stopped_at"] is not None for p in workers)  # it says it is gone

    again = _burst(tmp_path, db_url)  # nothing due: still exit 0, nothing run twice
    assert again.returncode == 0 and "burst done: 0 completed, 0 retried, 0 discarded, 0 in doubt" in again.stderr
    assert len((tmp_path / "ran.txt").read_text().split()) == 5


def test_a_burst_after_a_killed_one_says_what_it_left_and_can_wait_for_the_leases(tmp_path: Path,
                                                                                  db_url: str) -> None:
    """A burst started 1 s after another was killed printed "0 completed" and exited 0 while the jobs sat under the
    dead worker's lease: a daily cron burst deferred them a day without a word."""
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    (tmp_path / "hang").write_text("")
    app = App()
    app.task("slow")(lambda ctx, **_: None)
    clock = SystemClock()
    with open_store(db_url) as store:
        store.migrate()
        queue = Queue(store, clock=clock, source=current_source("cli"), app=app)
        for n in range(3):
            queue.enqueue("slow", {"n": n})
        queue.enqueue("slow", {"n": 9}, run_at=clock.now() + timedelta(hours=2))
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path}"}
    first = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "worker", "--burst", "--app", "jobs:app",
                              "--lease", "4", "--db", db_url], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started-0").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "started-0").exists(), "the first burst never started a job"
    finally:
        first.kill()  # kill -9: its claimed jobs stay under its lease
        first.wait(10)
    (tmp_path / "hang").unlink()

    result = _burst(tmp_path, db_url)
    assert result.returncode == 0, result.stderr
    assert "burst done: 0 completed" in result.stderr, result.stderr
    assert "3 running under another worker's lease (until " in result.stderr, result.stderr
    assert "1 due later (the first at " in result.stderr and "--wait-for-leases" in result.stderr

    waited = _burst(tmp_path, db_url, "--wait-for-leases", "60")
    assert waited.returncode == 0, waited.stderr
    assert "burst done: 3 completed" in waited.stderr, waited.stderr
    assert "left: 1 due later" in waited.stderr and "lease (until" not in waited.stderr
    assert sorted((tmp_path / "ran.txt").read_text().split()) == ["slow-0", "slow-1", "slow-2"]

    refused = subprocess.run([sys.executable, "-m", "oncebeat.cli", "worker", "--wait-for-leases", "5",
                              "--app", "jobs:app", "--db", db_url], cwd=tmp_path, env=env, text=True,
                             capture_output=True, timeout=60)
    assert refused.returncode == 2 and "--wait-for-leases goes with --burst" in refused.stderr
