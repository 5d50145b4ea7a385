"""Real OS processes: racing clocks, ``kill -9`` and SIGTERM of workers (G1, G3, G4).

The processes are the scripts in ``procs/``, started with ``sys.executable``
and a ``PYTHONPATH`` that includes this checkout's ``src`` (so the tests run
from source and installed alike). The database is the only thing they share.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oncebeat.provenance import current_source
from oncebeat.queue import Job, Queue
from oncebeat.store import Store, open_store
from oncebeat.timebase import SystemClock

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[2] / "src"
PROCS = Path(__file__).resolve().parent / "procs"
LEASE = 2.0  # seconds: short, so a dead worker's job is rescued quickly


class Proc:
    """A child process with its output in files (no pipe can fill up and block it)."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.name = name
        self.popen = popen
        self.out = out
        self.err = err

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit within {timeout} s\n{self.logs()}") from None

    def result(self) -> dict[str, Any]:
        lines = self.out.read_text().splitlines()
        assert lines, f"{self.name} printed nothing\n{self.logs()}"
        return dict(json.loads(lines[-1]))

    def logs(self) -> str:
        return f"--- {self.name} stdout ---\n{self.out.read_text()}--- {self.name} stderr ---\n{self.err.read_text()}"


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start ``procs/<script>`` as a child process; any child still running at teardown is killed."""
    children: list[Proc] = []

    def start(script: str, *args: str, name: str | None = None, env: dict[str, str] | None = None) -> Proc:
        name = name or f"{script}-{len(children) + 1}"
        child_env = {k: v for k, v in os.environ.items() if k != "ONCEBEAT_CRASH_AT"}
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
        child_env["ONCEBEAT_PROCESS_NAME"] = name
        child_env.update(env or {})
        out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            popen = subprocess.Popen([sys.executable, str(PROCS / script), *args], env=child_env,
                                     stdout=stdout, stderr=stderr)
        proc = Proc(name, popen, out, err)
        children.append(proc)
        return proc

    yield start
    for proc in children:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(timeout=10)


def wait_for(what: str, predicate: Callable[[], bool], timeout: float, *procs: Proc) -> None:
    """Poll ``predicate`` until true; fail (with the logs of ``procs``) on timeout or if one of them exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        exited = [p for p in procs if p.popen.poll() is not None]
        if exited:
            raise AssertionError(f"{exited[0].name} exited (code {exited[0].popen.returncode}) while waiting for "
                                 f"{what}\n" + "\n".join(p.logs() for p in procs))
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n" + "\n".join(p.logs() for p in procs))


def queue(store: Store) -> Queue:
    return Queue(store, clock=SystemClock(), source=current_source("api"))


def job(store: Store, job_id: int) -> Job:
    found = queue(store).get(job_id)
    assert found is not None
    return found


def outbox_lines(outbox: Path) -> list[str]:
    return outbox.read_text().splitlines() if outbox.exists() else []


# --- clocks ---------------------------------------------------------------------------------------------


def test_four_clock_processes_racing_record_exactly_one_occurrence_and_job_per_instant(
        db_url: str, spawn: Callable[..., Proc], tmp_path: Path) -> None:
    instants, start, pace = 1000, datetime(2026, 3, 1, 12, 0, tzinfo=UTC), 0.003
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    clocks = [spawn("clock_race.py", db_url, start.isoformat(), str(instants), str(rendezvous), str(pace),
                    name=f"clock-{i}") for i in range(4)]
    wait_for("four clock processes to be ready", lambda: len(list(rendezvous.glob("ready-*"))) == 4, 30, *clocks)
    (rendezvous / "go.tmp").write_text(f"{time.time() + 0.2:.6f}")  # then all tick together, in step
    (rendezvous / "go.tmp").rename(rendezvous / "go")
    for c in clocks:
        assert c.wait(timeout=120) == 0, c.logs()
    results = [c.result() for c in clocks]

    with open_store(db_url) as store:
        occurrences = store.read("list_occurrences", schedule_key="minutely")
        jobs = store.read("list_jobs", state=None, task="minute_job", limit=10 * instants)
        rejected = store.read("list_events", subject="schedule:minutely", kind="occurrence.duplicate_rejected",
                              since=start - timedelta(days=1))

    expected = [start + timedelta(minutes=m) for m in range(1, instants + 1)]
    assert [o["fire_at"] for o in occurrences] == expected
    assert {o["outcome"] for o in occurrences} == {"enqueued"}
    assert len(jobs) == instants
    assert sorted(j["occurrence_id"] for j in jobs) == sorted(o["id"] for o in occurrences)
    assert sorted(o["job_id"] for o in occurrences) == sorted(j["id"] for j in jobs)
    assert sum(r["inserted"] for r in results) == instants
    assert len(rejected) == sum(r["rejected"] for r in results)
    assert max(r["started"] for r in results) < min(r["ended"] for r in results), \
        "the four tick loops did not overlap, so they did not race"


# --- workers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_job_of_a_worker_killed_with_sigkill_is_rescued_by_another_worker_and_completes_once(
        db_url: str, store: Store, spawn: Callable[..., Proc], tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.txt"
    job_id = queue(store).enqueue("send_reminder", {"invoice_id": 1, "hang": 30})
    assert job_id is not None
    doomed = spawn("worker.py", db_url, str(outbox), "--lease", str(LEASE), name="doomed")
    wait_for("the job to be running", lambda: job(store, job_id).state == "running", 20, doomed)

    os.kill(doomed.pid, signal.SIGKILL)
    assert doomed.wait(timeout=10) == -signal.SIGKILL
    assert outbox_lines(outbox) == [], "killed while hanging, before the effect"

    survivor = spawn("worker.py", db_url, str(outbox), "--lease", str(LEASE), "--rescue", "0.3", name="survivor")
    wait_for("the job to complete", lambda: job(store, job_id).state == "completed", 20, survivor)
    survivor.popen.send_signal(signal.SIGTERM)
    assert survivor.wait(timeout=15) == 0, survivor.logs()

    done = job(store, job_id)
    assert done.attempt == 2
    assert [e["kind"] for e in done.errors] == ["rescue"]
    assert outbox_lines(outbox) == [f"reminder:1 pid={survivor.pid}"]
    [effect] = store.read("effect_get", key="reminder:1")
    assert (effect["state"], effect["attempt"], effect["source_pid"]) == ("done", 2, survivor.pid)
    assert done.worker_id == survivor.result()["worker_id"]


def test_sigterm_lets_a_running_job_finish_within_the_grace_period(
        db_url: str, store: Store, spawn: Callable[..., Proc], tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.txt"
    job_id = queue(store).enqueue("send_reminder", {"invoice_id": 2, "hang": 1.0})
    assert job_id is not None
    worker = spawn("worker.py", db_url, str(outbox), "--grace", "10", name="graceful")
    wait_for("the job to be running", lambda: job(store, job_id).state == "running", 20, worker)

    worker.popen.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0, worker.logs()
    assert job(store, job_id).state == "completed"
    assert outbox_lines(outbox) == [f"reminder:2 pid={worker.pid}"]
    assert worker.result()["processed"] == 1 and worker.result()["returned"] == 0


def test_sigterm_returns_a_job_longer_than_the_grace_period_without_burning_an_attempt(
        db_url: str, store: Store, spawn: Callable[..., Proc], tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.txt"
    job_id = queue(store).enqueue("send_reminder", {"invoice_id": 3, "hang": 5.0})
    assert job_id is not None
    worker = spawn("worker.py", db_url, str(outbox), "--grace", "1", name="impatient")
    wait_for("the job to be running", lambda: job(store, job_id).state == "running", 20, worker)

    worker.popen.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0, worker.logs()

    returned = job(store, job_id)  # the worker did not wait for the 5 s job: it gave it back
    assert (returned.state, returned.attempt, returned.worker_id, returned.errors) == ("available", 0, None, [])
    assert outbox_lines(outbox) == []
    assert worker.result()["returned"] == 1
    [event] = store.read("list_events", subject=f"worker:{worker.result()['worker_id']}", kind="job.returned",
                         since=datetime.now(UTC) - timedelta(hours=1))
    assert event["detail"]["jobs"] == [job_id]


def test_worker_killed_between_effect_and_record_leaves_the_effect_in_doubt_after_rescue(
        db_url: str, store: Store, spawn: Callable[..., Proc], tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.txt"
    job_id = queue(store).enqueue("send_reminder", {"invoice_id": 4})
    assert job_id is not None
    doomed = spawn("worker.py", db_url, str(outbox), "--lease", str(LEASE), name="doomed",
                   env={"ONCEBEAT_CRASH_AT": "effect_before_record"})
    assert doomed.wait(timeout=20) == -signal.SIGKILL, doomed.logs()
    assert outbox_lines(outbox) == [f"reminder:4 pid={doomed.pid}"], "the reminder went out before the kill"
    [started] = store.read("effect_get", key="reminder:4")
    assert started["state"] == "started"

    survivor = spawn("worker.py", db_url, str(outbox), "--lease", str(LEASE), "--rescue", "0.3", name="survivor")
    wait_for("the job to wait in doubt", lambda: job(store, job_id).state == "in_doubt", 20, survivor)
    survivor.popen.send_signal(signal.SIGTERM)
    assert survivor.wait(timeout=15) == 0, survivor.logs()

    [effect] = store.read("effect_get", key="reminder:4")
    assert effect["state"] == "in_doubt"
    assert outbox_lines(outbox) == [f"reminder:4 pid={doomed.pid}"], "never re-sent blindly"
    assert [e["kind"] for e in job(store, job_id).errors] == ["rescue", "in_doubt"]
