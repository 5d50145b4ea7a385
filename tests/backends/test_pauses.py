"""A pause holds work (issue 22 item 2), on both backends.

The 08:00 run was queued while no worker was up, the schedule was paused at 08:05, a worker started at 08:10: the
run executed while paused (10 reminders sent). A pause now holds the schedule's runs not yet started (no claim
takes them; resume releases them, each runs once, nothing lost, no burst), and a queue can be paused: no worker in
any process claims from it. These tests drive the real clock, worker and claim statement under a simulated clock,
and a second, real worker process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.audit import list_events
from oncebeat.clock import ClockProcess
from oncebeat.doctor import run_doctor
from oncebeat.errors import OncebeatError
from oncebeat.pauses import Held, held_jobs, pause_queue, queue_overview, resume_queue
from oncebeat.provenance import cli_operator, current_source
from oncebeat.queue import Queue
from oncebeat.schedule_admin import pause_schedule, resume_schedule
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock, SystemClock
from oncebeat.worker import Worker

KEY = "reminders"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
SRC = Path(__file__).resolve().parents[2] / "src"


def at(hour: int, minute: int = 0, *, day: int = 2) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def make_app(ran: list[dict[str, Any]]) -> App:
    app = App()

    @app.task(name="remind")
    def remind(ctx: Any) -> None:
        ran.append({"job": ctx.job.id, "occurrence": ctx.job.occurrence_id})

    app.task(name="note")(lambda ctx, **_: ran.append({"job": ctx.job.id}))
    # a misfire window far shorter than the pause: the held run still runs (it was enqueued before the pause)
    app.schedule(KEY, "0 8 * * *", tz="UTC", task="remind", catchup_window=600)
    return app


def burst(app: App, store: Store, clock: SimulatedClock, queues: tuple[str, ...] = ("default",)) -> Worker:
    wrk = Worker(app, store, clock=clock, queues=queues, source=current_source("worker"))
    wrk.burst()
    return wrk


def findings(store: Store, clock: SimulatedClock, app: App) -> list[tuple[str, str, str]]:
    report = run_doctor(store, now=clock.now(), since=at(0), definitions=app)
    return [(f.code, f.severity, f.summary) for f in report.findings]


def test_a_run_queued_before_a_schedule_pause_waits_until_resume_then_runs_once(
        store: Store, sim_clock: SimulatedClock) -> None:
    ran: list[dict[str, Any]] = []
    app = make_app(ran)
    clock = ClockProcess(app, store, clock=sim_clock)
    sim_clock.set(at(7, 59))
    clock.start()
    sim_clock.set(at(8, 0))
    clock.tick()  # 08:00: the run is queued, no worker is up
    [occ] = store.read("list_occurrences", schedule_key=KEY)
    assert occ["outcome"] == "enqueued" and occ["job_id"] is not None

    sim_clock.set(at(8, 5))
    assert pause_schedule(store, app, KEY, clock=sim_clock, source=current_source("cli")) is True
    sim_clock.set(at(8, 10))
    wrk = burst(app, store, sim_clock)  # the worker starts at 08:10

    assert ran == [], "a paused schedule's queued run is not claimed"
    assert wrk.left.held == (Held(kind="schedule", name=KEY, queue="default", n=1),)
    assert wrk.left.later == 0, "a held run is not 'due later'"
    assert Queue(store, clock=sim_clock, source=current_source("cli")).next_run_at() is None
    [row] = Queue(store, clock=sim_clock, source=current_source("cli")).list_jobs()
    assert (row["id"], row["state"], row["held"]) == (occ["job_id"], "available", f"schedule {KEY} paused")
    lost = [f for f in findings(store, sim_clock, app) if f[0] == "lost"]
    assert [(c, s) for c, s, _ in lost] == [("lost", "info")], lost  # held: neither lost nor late
    assert "not lost and not late" in lost[0][2]

    sim_clock.set(at(8, 0, day=3))
    clock.tick()  # the next day's occurrence during the pause: recorded paused, no job
    sim_clock.set(at(9, 0, day=3))  # resumed 25 hours later, far past the 10-minute catch-up window
    assert resume_schedule(store, app, KEY, clock=sim_clock, source=current_source("cli")) is True
    burst(app, store, sim_clock)
    burst(app, store, sim_clock)

    assert ran == [{"job": occ["job_id"], "occurrence": occ["id"]}], "released: runs once, nothing else"
    by_instant = {o["fire_at"]: o for o in store.read("list_occurrences", schedule_key=KEY)}
    assert by_instant[at(8, 0, day=3)]["outcome"] == "paused" and by_instant[at(8, 0, day=3)]["job_id"] is None
    assert held_jobs(store) == []
    events = {e["kind"]: e["detail"] for e in list_events(store, since=EPOCH, subject=f"schedule:{KEY}")}
    assert events["schedule.paused"]["held_runs"] == 1 and events["schedule.resumed"]["released_runs"] == 1


def test_a_paused_queue_is_not_claimed_while_other_queues_drain_and_resume_releases_each_job_once(
        store: Store, sim_clock: SimulatedClock) -> None:
    ran: list[dict[str, Any]] = []
    app = make_app(ran)
    queue = Queue(store, clock=sim_clock, source=current_source("api"), app=app)
    mail = [queue.enqueue("note", {"n": n}, queue="mail") for n in range(3)]
    other = [queue.enqueue("note", {"n": n}) for n in range(2)]
    operator = current_source("cli", operator=cli_operator())
    assert pause_queue(store, "mail", source=operator, clock=sim_clock) is True
    assert pause_queue(store, "mail", source=operator, clock=sim_clock) is False  # already paused

    wrk = burst(app, store, sim_clock, ("mail", "default"))
    assert sorted(r["job"] for r in ran) == other
    assert wrk.left.held == (Held(kind="queue", name="mail", queue="mail", n=3),)
    [status] = [s for s in queue_overview(store) if s.queue == "mail"]
    assert (status.paused, status.waiting, status.running, status.held) == (True, 0, 0, 3)
    assert status.held_by == ("queue mail paused",)

    assert resume_queue(store, "mail", source=operator, clock=sim_clock) is True
    assert resume_queue(store, "mail", source=operator, clock=sim_clock) is False
    burst(app, store, sim_clock, ("mail", "default"))
    burst(app, store, sim_clock, ("mail", "default"))
    assert sorted(r["job"] for r in ran) == sorted(other + mail), "each job once"
    events = list_events(store, since=EPOCH, subject="queue:mail")
    assert [(e["kind"], e["detail"].get("held", e["detail"].get("released"))) for e in events] == [
        ("queue.paused", 3), ("queue.resumed", 3)]
    assert [e["detail"]["operator"]["via"] for e in events] == ["cli", "cli"], "who paused and resumed is kept"


def test_a_run_in_a_paused_queue_is_held_by_the_queue_and_a_schedule_resume_does_not_release_it(
        store: Store, sim_clock: SimulatedClock) -> None:
    ran: list[dict[str, Any]] = []
    app = make_app(ran)
    clock = ClockProcess(app, store, clock=sim_clock)
    sim_clock.set(at(7, 59))
    clock.start()
    sim_clock.set(at(8, 0))
    clock.tick()
    pause_schedule(store, app, KEY, clock=sim_clock, source=current_source("cli"))
    pause_queue(store, "default", source=current_source("cli"), clock=sim_clock)
    assert held_jobs(store) == [Held(kind="queue", name="default", queue="default", n=1)]
    resume_schedule(store, app, KEY, clock=sim_clock, source=current_source("cli"))
    burst(app, store, sim_clock)
    assert ran == []
    resume_queue(store, "default", source=current_source("cli"), clock=sim_clock)
    burst(app, store, sim_clock)
    assert len(ran) == 1


def test_a_pause_does_not_stop_a_run_already_running(store: Store, sim_clock: SimulatedClock) -> None:
    ran: list[dict[str, Any]] = []
    app = make_app(ran)
    clock = ClockProcess(app, store, clock=sim_clock)
    sim_clock.set(at(7, 59))
    clock.start()
    sim_clock.set(at(8, 0))
    clock.tick()
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    [job] = queue.claim(7)  # a worker took the run before the pause committed
    pause_schedule(store, app, KEY, clock=sim_clock, source=current_source("cli"))
    pause_queue(store, "default", source=current_source("cli"), clock=sim_clock)
    assert queue.extend_leases(7, [job.id]) == {job.id: 1}, "its lease is still renewed"
    queue.complete(7, [job.id])
    record = queue.get(job.id)
    assert record is not None and record.state == "completed"
    assert held_jobs(store) == []


@pytest.mark.parametrize("name", ["", "  ", "mail\n", "x" * 201])
def test_a_bad_queue_name_is_refused_with_what_is_wrong(store: Store, name: str) -> None:
    with pytest.raises(OncebeatError, match="queue name"):
        pause_queue(store, name, source=current_source("cli"), clock=SystemClock())
    assert store.read("list_paused_queues") == []


def test_the_claim_stays_an_index_walk_with_a_schedule_and_a_queue_paused(backend: str, store: Store,
                                                                          sim_clock: SimulatedClock) -> None:
    """PostgreSQL: the claim reads jobs_fetch in order and about :limit rows, however long the backlog."""
    if backend != "postgres":
        pytest.skip("the plan check reads PostgreSQL's EXPLAIN")
    ran: list[dict[str, Any]] = []
    app = make_app(ran)
    clock = ClockProcess(app, store, clock=sim_clock)
    sim_clock.set(at(7, 59))
    clock.start()
    sim_clock.set(at(8, 0))
    clock.tick()
    pause_schedule(store, app, KEY, clock=sim_clock, source=current_source("cli"))
    pause_queue(store, "mail", source=current_source("cli"), clock=sim_clock)
    # the held run heads the queue (same run_at, lowest id): the claim passes over it, then takes 10 plain jobs
    queue = Queue(store, clock=sim_clock, source=current_source("api"), app=app)
    queue.enqueue_many([{"task": "note", "args": {"n": n}} for n in range(20_000)])
    with store.transaction() as tx:
        tx.execute("ANALYZE jobs")
    plans = {}
    for name in ("default", "mail"):
        with pytest.raises(_RolledBack), store.transaction() as tx:
            rows = tx.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + store.query_sql("claim_jobs"),
                              {"worker_id": 1, "queue": name, "limit": 10, "now": sim_clock.now(),
                               "lease_expires_at": sim_clock.now(), "capped": 0})
            plans[name] = "\n".join(str(next(iter(r.values()))) for r in rows)
            raise _RolledBack
    assert "jobs_fetch" in plans["default"] and "Seq Scan on jobs" not in plans["default"], plans["default"]
    # the run is looked up by primary key, row by row: never a hash of every occurrence of the paused schedules
    assert "occurrences_pkey" in plans["default"] and "hashed" not in plans["default"], plans["default"]
    assert "Rows Removed by Filter: 1\n" in plans["default"], "read 11 rows: the held run and 10 jobs"
    assert "Sort" not in plans["default"].split("LockRows")[-1], plans["default"]
    assert "One-Time Filter" in plans["mail"] and "(never executed)" in plans["mail"], plans["mail"]


class _RolledBack(Exception):
    """Raised to roll an EXPLAIN ANALYZE of a claim back."""


# --- across processes -----------------------------------------------------------------------------------------

JOBS = '''
from pathlib import Path

from oncebeat import App

app = App()


@app.task()
def note(ctx, n: int) -> None:
    with (Path(__file__).parent / "ran.txt").open("a") as out:
        out.write(f"{ctx.job.queue}-{n}\\n")
'''


def _cli(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "oncebeat.cli", *args]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{tmp_path}"}


def _ran(tmp_path: Path) -> list[str]:
    path = tmp_path / "ran.txt"
    return sorted(path.read_text().split()) if path.exists() else []


def _wait_for(what: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return what()


def test_a_queue_paused_from_one_process_is_not_claimed_by_a_worker_process_and_the_cli_reports_it(
        tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    app = App()
    app.task("note")(lambda ctx, **_: None)
    with open_store(db_url) as store:
        store.migrate()
    # a real worker process, polling both queues, started before the pause
    worker = subprocess.Popen(_cli(tmp_path, "worker", "--app", "jobs:app", "--db", db_url, "--queue", "mail",
                                   "--queue", "default"), cwd=tmp_path, env=_env(tmp_path), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        paused = subprocess.run(_cli(tmp_path, "queues", "pause", "mail", "--db", db_url), cwd=tmp_path,
                                env=_env(tmp_path), text=True, capture_output=True, timeout=120)
        assert paused.returncode == 0, paused.stderr
        assert "queue mail: paused" in paused.stdout
        with open_store(db_url) as store:
            queue = Queue(store, clock=SystemClock(), source=current_source("api"), app=app)
            for n in range(3):
                queue.enqueue("note", {"n": n}, queue="mail")
            for n in range(2):
                queue.enqueue("note", {"n": n})
        assert _wait_for(lambda: _ran(tmp_path) == ["default-0", "default-1"]), _ran(tmp_path)
        time.sleep(3)  # the worker polls on: the paused queue still yields nothing
        assert _ran(tmp_path) == ["default-0", "default-1"]
        listing = subprocess.run(_cli(tmp_path, "queues", "--app", "jobs:app", "--db", db_url), cwd=tmp_path,
                                 env=_env(tmp_path), text=True, capture_output=True, timeout=120)
        assert listing.returncode == 0, listing.stderr
        assert "mail: PAUSED since" in listing.stdout and "0 waiting, 0 running, 3 held (queue mail paused)" \
            in listing.stdout, listing.stdout
        jobs = subprocess.run(_cli(tmp_path, "jobs", "--db", db_url), cwd=tmp_path, env=_env(tmp_path), text=True,
                              capture_output=True, timeout=120)
        assert jobs.stdout.count("available (held: queue mail paused)") == 3, jobs.stdout

        resumed = subprocess.run(_cli(tmp_path, "queues", "resume", "mail", "--db", db_url), cwd=tmp_path,
                                 env=_env(tmp_path), text=True, capture_output=True, timeout=120)
        assert resumed.returncode == 0 and "3 held job(s) released" in resumed.stdout, resumed.stdout
        assert _wait_for(lambda: len(_ran(tmp_path)) == 5), _ran(tmp_path)
        time.sleep(1)
        assert _ran(tmp_path) == ["default-0", "default-1", "mail-0", "mail-1", "mail-2"], "each job once"
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err


def test_a_burst_worker_names_what_a_pause_holds_and_a_bad_name_is_an_error(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    app = App()
    app.task("note")(lambda ctx, **_: None)
    with open_store(db_url) as store:
        store.migrate()
        queue = Queue(store, clock=SystemClock(), source=current_source("api"), app=app)
        for n in range(2):
            queue.enqueue("note", {"n": n}, queue="mail")
        queue.enqueue("note", {"n": 9})
        pause_queue(store, "mail", source=current_source("cli"), clock=SystemClock())
    result = subprocess.run(_cli(tmp_path, "worker", "--burst", "--app", "jobs:app", "--db", db_url, "--queue",
                                 "mail", "--queue", "default"), cwd=tmp_path, env=_env(tmp_path), text=True,
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "burst done: 1 completed" in result.stderr
    assert "left: 2 held: queue mail paused; `oncebeat queues resume mail` releases them" in result.stderr
    assert _ran(tmp_path) == ["default-9"]
    bad = subprocess.run(_cli(tmp_path, "queues", "pause", " mail", "--db", db_url), cwd=tmp_path,
                         env=_env(tmp_path), text=True, capture_output=True, timeout=120)
    assert bad.returncode == 2 and "queue name ' mail' has spaces at its ends" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
