"""Run-time schedule management from the command line, as an operator does it, on both backends."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"

JOBS = '''
from oncebeat import App

app = App()


@app.task()
def report(ctx) -> None:
    pass


app.schedule("report", "0 * * * *", tz="UTC", task="report")
'''


def oncebeat(*args: str, cwd: Path, db_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{cwd}"}
    app = ["--app", "jobs:app"] if args[0] != "jobs" else []
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args, "--db", db_url, *app],
                          cwd=cwd, env=env, text=True, capture_output=True, timeout=120, check=False)


def test_operator_edits_retires_and_reruns_from_the_cli(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    assert oncebeat("tick", cwd=tmp_path, db_url=db_url).returncode == 0  # syncs the code's definitions

    edited = oncebeat("schedules", "set", "report", "--cron", "30 9 * * *", "--tz", "Europe/Paris",
                      cwd=tmp_path, db_url=db_url)
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout.startswith("report: version 2, 30 9 * * * in Europe/Paris")
    listed = oncebeat("schedules", cwd=tmp_path, db_url=db_url)
    assert "report: 30 9 * * * in Europe/Paris -> report [active, run-time edit" in listed.stdout, listed.stdout

    bad = oncebeat("schedules", "set", "report", "--cron", "61 9 * * *", cwd=tmp_path, db_url=db_url)
    assert bad.returncode == 2 and "error:" in bad.stderr and "minute" in bad.stderr
    assert "Traceback" not in bad.stderr

    now = datetime.now(UTC)
    start, end = (now - timedelta(days=2)).isoformat(), (now - timedelta(days=1)).isoformat()
    assert oncebeat("backfill", "report", "--from", start, "--until", end, cwd=tmp_path, db_url=db_url).returncode == 0
    with open_store(db_url) as store:
        [occurrence] = store.read("list_occurrences", schedule_key="report")
    refused = oncebeat("occurrences", "rerun", str(occurrence["id"]), cwd=tmp_path, db_url=db_url)
    assert refused.returncode == 2 and f"already has run {occurrence['job_id']} available" in refused.stderr
    assert oncebeat("jobs", "--cancel", str(occurrence["job_id"]), cwd=tmp_path, db_url=db_url).returncode == 0
    rerun = oncebeat("occurrences", "rerun", str(occurrence["id"]), cwd=tmp_path, db_url=db_url)
    assert rerun.returncode == 0, rerun.stderr
    assert f"re-run of occurrence {occurrence['id']}: report" in rerun.stdout and "manual" in rerun.stdout
    again = oncebeat("backfill", "report", "--from", start, "--until", end, cwd=tmp_path, db_url=db_url)
    assert "already in the ledger: backfilled by cli" in again.stdout and "cancelled" in again.stdout

    retired = oncebeat("schedules", "retire", "report", cwd=tmp_path, db_url=db_url)
    assert (retired.returncode, retired.stdout.strip()) == (0, "report: retired")
    assert "never fires again" in oncebeat("schedules", "set", "report", "--tz", "UTC", cwd=tmp_path,
                                           db_url=db_url).stderr
    missing = oncebeat("occurrences", "rerun", "987654", cwd=tmp_path, db_url=db_url)
    assert missing.returncode == 2 and "no occurrence 987654" in missing.stderr


def test_the_overlap_policy_is_set_shown_and_obeyed_from_the_cli(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    assert oncebeat("tick", cwd=tmp_path, db_url=db_url).returncode == 0
    assert "overlap allow" in oncebeat("schedules", cwd=tmp_path, db_url=db_url).stdout
    edited = oncebeat("schedules", "set", "report", "--overlap", "skip", cwd=tmp_path, db_url=db_url)
    assert edited.returncode == 0 and "overlap skip)" in edited.stdout, edited.stderr
    assert "; overlap skip" in oncebeat("schedules", cwd=tmp_path, db_url=db_url).stdout
    first = oncebeat("trigger", "report", cwd=tmp_path, db_url=db_url)
    second = oncebeat("trigger", "report", cwd=tmp_path, db_url=db_url)  # the first has not run yet
    assert first.returncode == second.returncode == 0, second.stderr
    assert ", job " in first.stdout and ", job " not in second.stdout
    assert "(overlap: previous run still running)" in second.stdout
    bad = oncebeat("schedules", "set", "report", "--overlap", "never", cwd=tmp_path, db_url=db_url)
    assert bad.returncode == 2 and "allow" in bad.stderr and "buffer_one" in bad.stderr


def test_describe_shows_one_schedule_with_its_next_fires_and_newest_occurrences(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    assert oncebeat("trigger", "report", cwd=tmp_path, db_url=db_url).returncode == 0  # syncs, then a manual run
    described = oncebeat("schedules", "describe", "report", "--count", "2", cwd=tmp_path, db_url=db_url)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith("report: 0 * * * * in UTC") and lines[0].endswith("-> report on queue default")
    assert "state active, origin code, version 1" in lines[1] and "overlap allow" in lines[1]
    assert [line.split()[0] for line in lines[2:4]] == ["next", "next"]
    assert lines[4].startswith("  occurrence 1: ") and " UTC manual, job 1 available by cli@" in lines[4]
    assert "." not in lines[4].split(" UTC ")[0]  # whole seconds
    listed = oncebeat("schedules", cwd=tmp_path, db_url=db_url)
    assert listed.returncode == 0 and "(manual run " in listed.stdout.splitlines()[0]  # a trigger is a run too
    unknown = oncebeat("schedules", "describe", "reprot", cwd=tmp_path, db_url=db_url)
    assert unknown.returncode == 2 and "no schedule 'reprot' (known: report)" in unknown.stderr


def test_a_second_run_of_an_occurrence_is_refused_naming_the_unfinished_one(tmp_path: Path, db_url: str) -> None:
    """`occurrences rerun` twice, and `jobs --retry` of the cancelled original after a re-run (issue 21 item 5):
    exit 2 with one line naming the run that is unfinished, no traceback, and still one unfinished run."""
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    assert oncebeat("tick", cwd=tmp_path, db_url=db_url).returncode == 0
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)  # one instant, always
    start, end = (hour - timedelta(minutes=1)).isoformat(), (hour + timedelta(minutes=1)).isoformat()
    assert oncebeat("backfill", "report", "--from", start, "--until", end, cwd=tmp_path, db_url=db_url).returncode == 0
    with open_store(db_url) as store:
        [occurrence] = store.read("list_occurrences", schedule_key="report")
    original = str(occurrence["job_id"])
    assert oncebeat("jobs", "--cancel", original, cwd=tmp_path, db_url=db_url).returncode == 0
    first = oncebeat("occurrences", "rerun", str(occurrence["id"]), cwd=tmp_path, db_url=db_url)
    assert first.returncode == 0, first.stderr
    with open_store(db_url) as store:
        [rerun_job] = [j["id"] for j in store.read("list_jobs", state="available", task=None, limit=10)]

    again = oncebeat("occurrences", "rerun", str(occurrence["id"]), cwd=tmp_path, db_url=db_url)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr == (f"error: occurrence {occurrence['id']} already has run {rerun_job} available; wait for it "
                            f"or cancel it (`oncebeat jobs --cancel {rerun_job}`), then re-run it\n")
    retried = oncebeat("jobs", "--retry", original, cwd=tmp_path, db_url=db_url)
    assert retried.returncode == 2 and "Traceback" not in retried.stderr
    assert retried.stderr == (f"error: occurrence {occurrence['id']} already has run {rerun_job} available; wait for "
                              f"it or cancel it (`oncebeat jobs --cancel {rerun_job}`), then retry job {original}\n")
    with open_store(db_url) as store:
        assert [j["id"] for j in store.read("list_jobs", state="available", task=None, limit=10)] == [rerun_job]

    # once the re-run is cancelled the original may run again, from the command line too
    assert oncebeat("jobs", "--cancel", str(rerun_job), cwd=tmp_path, db_url=db_url).returncode == 0
    ok = oncebeat("jobs", "--retry", original, cwd=tmp_path, db_url=db_url)
    assert (ok.returncode, ok.stdout) == (0, f"job {original}: put back in the queue, runs now\n"), ok.stderr
    waiting = oncebeat("jobs", "--retry", original, cwd=tmp_path, db_url=db_url)  # it waits: nothing to retry
    assert waiting.returncode == 2 and f"job {original} is available and cannot be retried" in waiting.stderr


def test_the_catch_up_window_is_read_and_printed_in_words(tmp_path: Path, db_url: str) -> None:
    """Issue 26 item 5: durations in words, not 86400."""
    (tmp_path / "jobs.py").write_text(JOBS, encoding="utf-8")
    assert oncebeat("tick", cwd=tmp_path, db_url=db_url).returncode == 0
    listed = oncebeat("schedules", cwd=tmp_path, db_url=db_url)
    assert "within 24h;" in listed.stdout and "86400" not in listed.stdout, listed.stdout
    edited = oncebeat("schedules", "set", "report", "--catchup-window", "1h30m", cwd=tmp_path, db_url=db_url)
    assert edited.returncode == 0 and "window 90m;" in edited.stdout, edited.stderr
    with open_store(db_url) as store:
        assert float(store.read("get_schedule", key="report")[0]["catchup_window"]) == 5400.0
    bad = oncebeat("schedules", "set", "report", "--catchup-window", "a day", cwd=tmp_path, db_url=db_url)
    assert bad.returncode == 2 and "give a number of seconds (86400) or 24h, 90m" in bad.stderr
