"""Processes say what happens (issue 26 item 1): a start line, a stop line with its reason, a line per job and per
fire at INFO (the default of long-running processes), -v/--log-level/--log-format after any subcommand, and JSON
lines for log drains through the same redaction as text."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from oncebeat import Queue, SystemClock, current_source, open_store
from oncebeat.errors import StoreError

SRC = Path(__file__).resolve().parents[2] / "src"

APP = '''
from oncebeat import App

app = App()


@app.task()
def hello(ctx, n: int) -> None:
    pass


app.schedule("tick", "every 1s", tz="UTC", task="hello", args={"n": 0})
'''


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path}"}


def _await_completed_hello_jobs(db_url: str, n: int, timeout: float = 60.0) -> None:
    """Wait until the worker has completed ``n`` jobs the clock fired (the processes migrate the database first).

    A worker logs a job's finish before it records the completion, and the clock logs a fire before it fires the
    next instant: two completed jobs mean every line the test reads has been written.
    """
    deadline = time.monotonic() + timeout
    with open_store(db_url) as store:
        while True:
            try:
                if len(store.read("list_jobs", state="completed", task="hello", limit=n)) >= n:
                    return
            except StoreError:  # no tables yet
                pass
            assert time.monotonic() < deadline, f"the worker completed fewer than {n} fired jobs in {timeout} s"
            time.sleep(0.1)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=tmp_path, env=_env(tmp_path), text=True,
                          capture_output=True, timeout=120)


def test_a_burst_logs_a_json_line_per_job_start_and_finish(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "logapp.py").write_text(APP, encoding="utf-8")
    assert _cli(tmp_path, "migrate", "--app", "logapp:app", "--db", db_url).returncode == 0
    with open_store(db_url) as store:
        queue = Queue(store, clock=SystemClock(), source=current_source("api"))
        ids = [queue.enqueue("hello", {"n": n}) for n in range(3)]
    done = _cli(tmp_path, "worker", "--burst", "--app", "logapp:app", "--db", db_url, "--log-format", "json")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    finished = [r for r in records if r.get("event") == "job.finished"]
    assert sorted(r["job_id"] for r in finished) == sorted(ids)
    assert all(r["outcome"] == "completed" and r["task"] == "hello" and r["attempt"] == 1 for r in finished)
    assert all(isinstance(r["duration_seconds"], float) for r in finished)
    assert len([r for r in records if r.get("event") == "job.started"]) == 3
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)


def test_logging_options_are_accepted_after_any_subcommand_and_refused_by_name_when_wrong(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    for args in (["migrate", "-v", "--db", db], ["schedules", "next", "0 8 * * *", "--tz", "UTC", "-v"],
                 ["jobs", "--db", db, "--log-level", "debug", "--log-format", "json"]):
        done = _cli(tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr)
    bad = _cli(tmp_path, "jobs", "--db", db, "--log-format", "xml")
    assert bad.returncode == 2 and "Invalid value for '--log-format'" in bad.stderr


def test_worker_and_clock_print_a_start_line_and_a_stop_line_that_says_why(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "logapp.py").write_text(APP, encoding="utf-8")
    env = _env(tmp_path)
    procs = {role: subprocess.Popen([sys.executable, "-m", "oncebeat.cli", role, "--app", "logapp:app", "--db", db_url],
                                    cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for role in ("clock", "worker")}
    try:
        _await_completed_hello_jobs(db_url, 2)
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        outputs = {role: p.communicate(timeout=60) for role, p in procs.items()}
    clock_err, worker_err = outputs["clock"][1], outputs["worker"][1]
    assert procs["clock"].returncode == 0 and procs["worker"].returncode == 0, (clock_err, worker_err)
    assert "clock starting: 1 schedule(s), database " in clock_err and "clock started: time source host" in clock_err
    assert "fired tick " in clock_err
    assert "clock stopped (SIGTERM):" in clock_err
    assert "worker 2 started: queues default, 4 slots" in worker_err or " started: queues default, 4 slots" in worker_err
    assert "time source host clock" in worker_err
    assert "(hello) attempt 1 completed in " in worker_err
    assert "stopped (SIGTERM):" in worker_err
