"""Retention (`oncebeat prune`, oncebeat.retention): history goes, what the guarantees need stays.

Forty days of a six-hourly schedule run on a simulated clock with the real clock and worker; each run sends one
plain effect and one under the reminder app's protected ``reminder:`` prefix. Then the prune, dry and applied,
on both backends: the same counts, nothing a guarantee reads deleted, and the clock and the doctor go on as if
nothing happened (no instant fired twice, no false finding).
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import ClockProcess
from oncebeat.doctor import run_doctor
from oncebeat.retention import OCCURRENCE_FLOOR, prune, protected_effects
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

DAYS = 40


def counts(store: Store) -> dict[str, int]:
    with store.transaction() as tx:
        return {t: int(tx.execute(f"SELECT count(*) AS n FROM {t}")[0]["n"])
                for t in ("jobs", "occurrences", "effects", "events", "processes")}


def history_app() -> App:
    app = App()

    @app.task()
    def work(ctx: Any) -> None:
        occ = ctx.occurrence()
        ctx.effect(f"plain:{occ['id']}", lambda: "sent", payload={"o": occ["id"]})
        ctx.effect(f"reminder:{occ['id']}", lambda: "sent", payload={"o": occ["id"]})

    app.schedule("every6h", "0 */6 * * *", tz="UTC", task="work")
    return app


def run_days(app: App, store: Store, clock: SimulatedClock, days: int) -> tuple[ClockProcess, Worker]:
    clk = ClockProcess(app, store, clock=clock)
    clk.start()
    worker = Worker(app, store, clock=clock)
    worker.register()
    for _ in range(days * 4):
        clock.advance(6 * 3600)
        clk.tick()
        worker.drain()
    return clk, worker


@pytest.fixture
def history(store: Store, sim_clock: SimulatedClock) -> tuple[App, ClockProcess, Worker]:
    assert "reminder:" in protected_effects()  # the reminder app (imported by conftest) protects its keys
    app = history_app()
    clk, worker = run_days(app, store, sim_clock, DAYS)
    # One effect left in doubt 35 days ago (a crash after the send): it and its job must stay until resolved.
    with store.transaction() as tx:
        tx.execute("UPDATE effects SET state = 'in_doubt' WHERE key = 'plain:5'")
    return app, clk, worker


def test_dry_run_counts_exactly_what_apply_deletes_and_deletes_nothing(store: Store, sim_clock: SimulatedClock,
                                                                        history: Any) -> None:
    before = counts(store)
    dry = prune(store, timedelta(days=7), now=sim_clock.now(), batch=37)
    assert counts(store) == before
    assert dry.total > 0
    applied = prune(store, timedelta(days=7), apply=True, now=sim_clock.now(), batch=37)
    assert {t.table: t.pruned for t in applied.tables} == {t.table: t.pruned for t in dry.tables}
    after = counts(store)
    for t in applied.tables:
        if t.table == "events":  # the prune records itself: one audit.pruned event more
            assert after["events"] == before["events"] - t.pruned + 1
        else:
            assert after[t.table] == before[t.table] - t.pruned, t.table
    # A second prune finds nothing more to delete (the windows walked the whole table the first time).
    again = prune(store, timedelta(days=7), apply=True, now=sim_clock.now(), batch=1000)
    assert {t.table: t.pruned for t in again.tables if t.table != "events"} == {
        "jobs": 0, "occurrences": 0, "effects": 0, "processes": 0}


def test_prune_keeps_what_the_guarantees_need(store: Store, sim_clock: SimulatedClock, history: Any) -> None:
    app, clk, worker = history
    now = sim_clock.now()
    report = prune(store, timedelta(days=7), apply=True, now=now, batch=50)
    cutoff = now - timedelta(days=7)
    with store.transaction() as tx:
        jobs = {r["id"]: r for r in tx.execute("SELECT id, state, finished_at FROM jobs")}
        effects = {r["key"]: r for r in tx.execute("SELECT key, state, job_id FROM effects")}
        occ = tx.execute("SELECT fire_at FROM occurrences ORDER BY fire_at")
        old_events = [e for e in tx.execute("SELECT kind, at FROM events") if e["at"] < cutoff]
        fired = int(tx.execute("SELECT count(*) AS n FROM jobs WHERE task = 'work'")[0]["n"])
    # Finished jobs older than a week went, but the one whose effect is in doubt stayed, and so did the run of
    # every occurrence the ledger keeps (each occurrence left has its job: check's one-job-per-occurrence).
    with store.transaction() as tx:
        run_of_kept = {r["id"] for r in tx.execute("SELECT j.id FROM jobs j JOIN occurrences o ON o.id = j.occurrence_id")}
    old_jobs = {j["id"] for j in jobs.values() if j["finished_at"] < cutoff}
    assert old_jobs == {effects["plain:5"]["job_id"]} | {j for j in run_of_kept if jobs[j]["finished_at"] < cutoff}
    assert len(run_of_kept) == 4 * 32 + 1
    assert effects["plain:5"]["state"] == "in_doubt"
    # Every reminder: effect stayed (protected, one per run ever); plain effects went with their week.
    runs = next(t.pruned for t in report.tables if t.table == "jobs") + len(jobs)
    assert sum(1 for k in effects if k.startswith("reminder:")) == runs
    assert all(e["job_id"] in jobs for k, e in effects.items() if k.startswith("plain:"))
    # Done effects older than a week went even where their job stayed with its occurrence: one per recent run,
    # and the one in doubt.
    recent = sum(1 for j in jobs.values() if j["finished_at"] >= cutoff)
    assert sum(1 for k in effects if k.startswith("plain:")) == recent + 1 and fired == len(jobs)
    # Occurrences: only those older than the floor (a month and a day) went; the floor, not the week, decided.
    assert report.occurrences_before == now - OCCURRENCE_FLOOR
    assert occ[0]["fire_at"] == report.occurrences_before  # a fire instant: kept (strictly older ones go)
    assert len(occ) == 4 * 32 + 1
    # The audit trail older than the cutoff went; the prune recorded itself.
    assert old_events == []
    kinds = [e["kind"] for e in store.read("list_events", subject=None, kind="audit.pruned", since=cutoff)]
    assert kinds == ["audit.pruned"]

    # The clock goes on: the next instant fires once, nothing pruned is fired again, the doctor finds no error.
    fired = len(occ)
    sim_clock.advance(6 * 3600)
    clk.tick()
    worker.drain()
    with store.transaction() as tx:
        assert int(tx.execute("SELECT count(*) AS n FROM occurrences")[0]["n"]) == fired + 1
        dup = tx.execute("SELECT schedule_key, fire_at, count(*) AS n FROM occurrences "
                         "GROUP BY schedule_key, fire_at HAVING count(*) > 1")
    assert dup == []
    restarted = ClockProcess(app, store, clock=sim_clock)  # a restart reads the cursor from the kept rows
    restarted.start()
    restarted.tick()
    assert counts(store)["occurrences"] == fired + 1
    doc = run_doctor(store, now=sim_clock.now())
    errors = [f for f in doc.findings if f.severity == "error"]
    # The only error is the effect left in doubt on purpose, with its job and process still as evidence.
    assert [(f.code, f.subject) for f in errors] == [("in-doubt", "effect:plain:5")], [f.summary for f in errors]
    assert "job 5" in errors[0].summary and "pid" in errors[0].summary


def test_prune_refuses_a_cutoff_under_a_day_and_bad_arguments(store: Store, sim_clock: SimulatedClock) -> None:
    with pytest.raises(ValueError, match="at least 1 day"):
        prune(store, timedelta(hours=23), now=sim_clock.now())
    with pytest.raises(ValueError, match="batch"):
        prune(store, timedelta(days=2), batch=0, now=sim_clock.now())
    with pytest.raises(ValueError, match="unknown table"):
        prune(store, timedelta(days=2), tables=("schedules",), now=sim_clock.now())


def test_retention_schedule_prunes_as_an_engine_job(store: Store, sim_clock: SimulatedClock) -> None:
    app = history_app()
    app.retention(7 * 86400.0, cron="30 3 * * *", tz="UTC")
    run_days(app, store, sim_clock, 12)
    kinds = [e["kind"] for e in store.read("list_events", subject=None, kind="audit.pruned",
                                           since=sim_clock.now() - timedelta(days=30))]
    assert len(kinds) >= 4  # from day 8 on the daily run found history older than a week
    with store.transaction() as tx:  # the daily run pruned the audit trail older than a week (+ a day of slack)
        oldest = min(r["at"] for r in tx.execute("SELECT at FROM events"))
    assert oldest >= sim_clock.now() - timedelta(days=8)


def test_cli_prune_dry_run_then_apply(db_url: str, store: Store, sim_clock: SimulatedClock,
                                      tmp_path: Path) -> None:
    run_days(history_app(), store, sim_clock, 3)
    env = {**{k: v for k, v in os.environ.items() if k != "ONCEBEAT_CONFIG"}, "DATABASE_URL": db_url}
    before = counts(store)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "oncebeat.cli", "prune", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=120)

    bad = cli("--older-than", "2h")
    assert bad.returncode == 2 and "at least 1 day" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    # The simulated history lies in 2026; the real clock is later, so everything finished is older than a day.
    dry = cli("--older-than", "1d")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing deleted" in dry.stdout and "kept, whatever their age" in dry.stdout
    assert counts(store) == before
    applied = cli("--older-than", "1d", "--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    assert '"applied": true' in applied.stdout
    assert counts(store)["jobs"] < before["jobs"]
