"""Leases judged by one clock (issue 22 item 3).

A worker whose host clock ran 45 s ahead rescued a live job 2 s after it started (it judged the lease by its own
clock) and the job's body ran a second time. With ``--time-source database`` a worker's lease decisions (claim,
heartbeat, fencing, rescue) read PostgreSQL's ``clock_timestamp()``, the same for every host; on host time a
worker warns at start when its clock is more than a second from the database's. SQLite is one host, one clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from oncebeat.app import App
from oncebeat.dbtime import DatabaseClock, host_skew
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store
from oncebeat.timebase import SystemClock
from oncebeat.worker import Worker

SRC = Path(__file__).resolve().parents[2] / "src"


class AheadClock(SystemClock):
    """This host's clock, ``ahead`` seconds fast (a host whose NTP is broken)."""

    def __init__(self, ahead: float) -> None:
        self.ahead = timedelta(seconds=ahead)

    def now(self) -> datetime:
        return super().now() + self.ahead


def _held_job(store: Store) -> int:
    """A job claimed by a healthy worker, its 30 s lease just begun."""
    app = App()
    app.task("work")(lambda ctx: None)
    queue = Queue(store, clock=SystemClock(), source=current_source("api"))
    job_id = queue.enqueue("work", {})
    assert job_id is not None
    holder = Worker(app, store, lease_seconds=30)
    [job] = holder.queue.claim(holder.register(), lease_seconds=30)
    assert job.id == job_id
    return job_id


@pytest.mark.postgres
def test_a_worker_on_the_database_clock_never_rescues_a_live_job_whatever_its_host_clock_says(
        pg_db_url: str) -> None:
    from oncebeat.store import open_store

    with open_store(pg_db_url) as store:
        store.migrate()
        job_id = _held_job(store)
        app = App()
        # the hazard: judged by a host clock 45 s fast, the live lease looks expired
        fast = Worker(app, store, clock=AheadClock(45))
        assert host_skew(store, fast.clock) == pytest.approx(45, abs=2)
        # one clock for every host: the rescuer reads the server's clock, not its own
        judged_by_database = Worker(app, store, clock=DatabaseClock(store))
        assert judged_by_database.rescue() == []
        job = Queue(store, clock=SystemClock(), source=current_source("api")).get(job_id)
        assert job is not None and job.state == "running"
        rescued = fast.rescue()
        assert [r["id"] for r in rescued] == [job_id], "the host-clock rescuer takes the live job: why it warns"


def test_host_skew_is_none_on_sqlite_where_every_process_shares_one_clock(store: Store, backend: str) -> None:
    skew = host_skew(store, AheadClock(45))
    if backend == "sqlite":
        assert skew is None
    else:
        assert skew == pytest.approx(45, abs=2)
        assert abs(host_skew(store) or 0.0) < 1.0


def test_worker_accepts_the_database_time_source_on_postgres_and_refuses_it_on_sqlite(db_url: str, backend: str,
                                                                                     tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    (tmp_path / "noop.py").write_text("from oncebeat import App\napp = App()\n", encoding="utf-8")
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    result = subprocess.run([sys.executable, "-m", "oncebeat.cli", "worker", "--burst", "--time-source", "database",
                             "--app", "noop:app", "--db", db_url], cwd=tmp_path, env=env, text=True,
                            capture_output=True, timeout=120)
    if backend == "postgres":
        assert result.returncode == 0, result.stderr
        assert "burst done: 0 completed" in result.stderr and "warning" not in result.stderr
    else:
        assert result.returncode == 2 and "time_source = database needs PostgreSQL" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.postgres
def test_a_worker_on_host_time_warns_at_start_when_its_clock_is_off_by_more_than_a_second(
        pg_db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import oncebeat.dbtime
    from oncebeat.cli import _warn_about_skew
    from oncebeat.store import open_store

    with open_store(pg_db_url) as store:
        store.migrate()
        _warn_about_skew(store, "host")
        assert capsys.readouterr().err == ""  # this machine's clock is the server's
        monkeypatch.setattr(oncebeat.dbtime, "SystemClock", lambda: AheadClock(45))
        _warn_about_skew(store, "database")
        assert capsys.readouterr().err == ""  # on the database's clock the host's does not matter
        _warn_about_skew(store, "host")
        err = capsys.readouterr().err
        assert "this host's clock is 45" in err and "s ahead of the database's" in err
        assert "--time-source database" in err
