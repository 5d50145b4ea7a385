"""``oncebeat tick`` and ``--time-source`` as a user runs them: real subprocesses on both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"

JOBS = '''
from oncebeat import App

app = App()


@app.task()
def beat(ctx) -> None:
    pass


app.schedule("beat", "every 1s", tz="UTC", task="beat", catchup="none")
'''


def oncebeat(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{cwd}"}
    return subprocess.Popen([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_ticks_run_late_twice_and_concurrently_exit_0_and_enqueue_each_occurrence_once(
        tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    args = ("tick", "--app", "jobs:app", "--db", db_url)
    code, out, err = finish(oncebeat(*args, cwd=tmp_path))
    assert (code, out.splitlines()[-1]) == (0, "tick: nothing was due"), err
    assert out.splitlines()[0] == "time source: host clock (this machine's wall clock)"
    time.sleep(2.2)
    results = [finish(p) for p in [oncebeat(*args, cwd=tmp_path) for _ in range(3)]]  # three at once
    assert [code for code, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    assert all("Traceback" not in err for _, _, err in results)
    with open_store(db_url) as store:
        occurrences = store.read("list_occurrences", schedule_key="beat")
        jobs = store.read("list_jobs", state=None, task=None, limit=1000)
    enqueued = [o for o in occurrences if o["outcome"] == "enqueued"]
    assert 1 <= len(enqueued) <= 3, "catchup none: the newest due instant of each pass, no burst"
    assert sorted(j["occurrence_id"] for j in jobs) == sorted(o["id"] for o in enqueued)

    newest = max(o["fire_at"] for o in enqueued)
    code, out, err = finish(oncebeat(*args, "--at", newest.isoformat(), cwd=tmp_path))
    assert (code, out.splitlines()[-1]) == (0, "tick: nothing was due"), "a duplicate delivery runs nothing"


def test_tick_refuses_a_malformed_or_far_future_at_with_a_clear_message(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    code, _, err = finish(oncebeat("tick", "--app", "jobs:app", "--db", db_url, "--at", "tomorrow", cwd=tmp_path))
    assert code == 2 and "'tomorrow' is not an ISO instant" in err and "--at" in err
    code, _, err = finish(oncebeat("tick", "--app", "jobs:app", "--db", db_url, "--at", "2099-01-01T00:00:00Z",
                                   cwd=tmp_path))
    assert code == 2 and "after this clock's time" in err and "Traceback" not in err


def test_time_source_database_is_named_at_start_on_postgresql_and_refused_on_sqlite(
        tmp_path: Path, backend: str, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    code, out, err = finish(oncebeat("tick", "--app", "jobs:app", "--db", db_url, "--time-source", "database",
                                     cwd=tmp_path))
    if backend == "sqlite":
        assert code == 2
        assert "error: time_source = database needs PostgreSQL" in err and "Traceback" not in err
    else:
        assert code == 0, err
        assert out.startswith("time source: database clock (PostgreSQL clock_timestamp(), the same for every host; "
                              "this host's clock is ")
