# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Bulk delete of jobs (issue 26 item 5): finished jobs only, by ``oncebeat prune``'s rules (never a running,
leased or waiting job, nor the run of an occurrence the ledger keeps), from the dashboard (ticked or all matching,
a confirmation naming the count and how many would go, admin + CSRF, audited) and from the CLI
(``oncebeat jobs delete``, a dry run unless --yes). On both backends."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat import processes
from oncebeat.clock import ClockProcess
from oncebeat.job_admin import bulk_action, deletable
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.reminders.runtime import Runtime
from oncebeat.timebase import SimulatedClock

SRC = Path(__file__).resolve().parents[2] / "src"


def _jobs(runtime: Runtime, *, days_ago: float = 0, queue: str = "dq") -> dict[str, list[int]]:
    """Two discarded, one completed, one cancelled, one running (leased) and one available job on ``queue``,
    finished ``days_ago`` days ago."""
    clock = SimulatedClock(runtime.clock.now() - timedelta(days=days_ago))
    q = Queue(runtime.store, clock=clock, source=current_source("api"))
    wid = processes.register(runtime.store, role="worker", source=current_source("worker"), clock=clock)
    out: dict[str, list[int]] = {"discarded": [], "completed": [], "cancelled": [], "running": [], "available": []}
    for kind in ("discarded", "discarded", "completed", "running"):
        q.enqueue("reminders.scan", queue=queue, max_attempts=1)
        [job] = q.claim(wid, queues=[queue])
        if kind == "completed":
            q.complete(wid, [job.id])
        elif kind == "discarded":
            q.fail(job, wid, f"boom {job.id}", permanent=True)
        out[kind].append(job.id)
    cancelled = q.enqueue("reminders.scan", queue=queue)
    assert cancelled is not None and q.cancel(cancelled)
    out["cancelled"].append(cancelled)
    available = q.enqueue("reminders.scan", queue=queue)
    assert available is not None
    out["available"].append(available)
    return out


def _exists(runtime: Runtime, job_id: int) -> bool:
    return Queue(runtime.store, clock=runtime.clock, source=current_source("api")).get(job_id) is not None


def test_only_finished_jobs_go_and_never_the_run_of_an_occurrence_the_ledger_keeps(runtime: Runtime) -> None:
    jobs = _jobs(runtime)
    fire = ClockProcess(runtime.app, runtime.store, clock=runtime.clock).trigger("reminders")
    q = Queue(runtime.store, clock=runtime.clock, source=current_source("cli"))
    assert fire.job_id is not None and q.cancel(fire.job_id)  # finished, but its occurrence is the newest one
    everything = [i for ids in jobs.values() for i in ids] + [fire.job_id]
    expected = sorted(jobs["discarded"] + jobs["completed"] + jobs["cancelled"])
    assert sorted(deletable(q, everything)) == expected
    assert all(_exists(runtime, i) for i in everything)  # the dry run deletes nothing
    outcome = bulk_action(q, "delete", everything)
    assert sorted(outcome.done) == expected
    why = dict(outcome.skipped)
    assert why[jobs["running"][0]].startswith("it is running (only completed, discarded or cancelled")
    assert why[jobs["available"][0]].startswith("it is available")
    assert why[fire.job_id].startswith("kept: ") and "occurrence the ledger keeps" in why[fire.job_id]
    assert [i for i in everything if _exists(runtime, i)] == [jobs["running"][0], jobs["available"][0], fire.job_id]
    [event] = runtime.store.read("events_of_subject", subject="jobs", limit=1)
    assert event["kind"] == "jobs.bulk" and event["detail"]["verb"] == "delete"
    assert sorted(event["detail"]["ids"]) == expected and event["detail"]["skipped"] == 3
    assert outcome.describe().startswith("deleted 4 of 7 jobs; 3 not: ")


def test_delete_all_matching_on_the_dashboard_after_a_confirmation_naming_the_count(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    jobs = _jobs(runtime)
    admin = dashboard_client(role="admin")
    page = admin.get("/jobs?queue=dq").text
    assert 'value="delete:matching"' in page and 'value="delete:selected"' in page
    confirm = admin.post("/jobs/bulk", data={"csrf": csrf_of(page), "do": "delete:matching", "queue": "dq"})
    assert confirm.status_code == 200 and "<h1>Delete 4 jobs? <span class=\"muted\">(6 chosen)</span></h1>" in confirm.text
    text = html.unescape(re.sub(r"<[^>]+>", "", confirm.text))
    assert "4 of 6 would be deleted now" in text and "never a\nrunning job" in text and "Yes, delete 4 jobs" in text
    assert all(_exists(runtime, i) for ids in jobs.values() for i in ids)  # nothing before the confirmation
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', confirm.text))
    answer = admin.post("/jobs/bulk/run", data=fields)
    assert answer.status_code == 303 and answer.headers["location"] == "/jobs?queue=dq"
    flash = html.unescape(admin.get("/jobs?queue=dq").text)
    assert "deleted 4 of 6 jobs; 2 not: " in flash
    assert {i for ids in jobs.values() for i in ids if _exists(runtime, i)} == {*jobs["running"], *jobs["available"]}
    [event] = runtime.store.read("events_of_subject", subject="jobs", limit=1)
    assert event["detail"]["verb"] == "delete" and event["detail"]["operator"]["via"] == "dashboard"
    # A viewer cannot, and the confirmation's CSRF field is checked.
    viewer = dashboard_client()
    refused = viewer.post("/jobs/bulk", data={"csrf": csrf_of(viewer.get("/jobs").text), "do": "delete:matching"})
    assert refused.status_code == 403
    assert admin.post("/jobs/bulk/run", data={**fields, "csrf": "forged"}).status_code == 403


def _cli(db_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", "jobs", "delete", "--db", db_url, *args],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)


def test_the_cli_counts_first_and_deletes_with_yes_only_what_finished_before_the_cutoff(
        runtime: Runtime, db_url: str, tmp_path: Path) -> None:
    old = _jobs(runtime, days_ago=10, queue="old")
    new = _jobs(runtime, queue="new")
    dry = _cli(db_url, tmp_path, "--state", "discarded", "--older-than", "7d")
    assert dry.returncode == 0, dry.stderr
    assert "would delete 2 of 2 matching job(s)" in dry.stdout and "dry run: nothing deleted" in dry.stdout
    assert all(_exists(runtime, i) for i in old["discarded"])
    done = _cli(db_url, tmp_path, "--state", "discarded", "--older-than", "7d", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["deleted"] == 2
    assert not any(_exists(runtime, i) for i in old["discarded"])
    assert all(_exists(runtime, i) for i in new["discarded"])  # finished today: younger than 7 days
    every = _cli(db_url, tmp_path, "--yes")  # any finished state, any age
    assert every.returncode == 0 and "deleted 6 of 6 jobs" in every.stdout, every.stdout + every.stderr
    assert all(_exists(runtime, i) for i in old["running"] + new["running"] + old["available"])
    bad = _cli(db_url, tmp_path, "--older-than", "a week")
    assert bad.returncode == 2 and "--older-than" in bad.stderr and "7d" in bad.stderr and "Traceback" not in bad.stderr
    running = _cli(db_url, tmp_path, "--state", "running")
    assert running.returncode == 2 and "'running' is not one of 'completed', 'discarded', 'cancelled'" in running.stderr
