"""The simulator and the invariant checker: faults injected, nothing twice, nothing lost — and the checker can fail."""

from __future__ import annotations

import json
import mailbox
import shutil
from datetime import date
from pathlib import Path

import pytest

from oncebeat.app import ScheduleDef
from oncebeat.reminders.policy import Policy
from oncebeat.simulate import FAULTS, SimConfig, parse_faults, simulate
from oncebeat.simulate.checker import PaymentWindow
from oncebeat.store import open_store

HIGHEST = Policy(collapse="highest")


def run(tmp_path: Path, db_url: str | None, faults: str, *, days: int = 10, start: date = date(2026, 1, 5),
        seed: int = 7, naive: bool = False, invoices: int = 60, policy: Policy | None = None):
    return simulate(SimConfig(days=days, start=start, seed=seed, faults=parse_faults(faults), db_url=db_url,
                              workdir=tmp_path / "sim", compare_naive=naive, settle_days=1.5, invoices=invoices,
                              policy=policy or Policy()))


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_kind_leaves_every_invariant_holding(fault: str, tmp_path: Path, db_url: str) -> None:
    # dst needs a transition inside the run: start just before the US spring-forward.
    start = date(2026, 3, 2) if fault == "dst" else date(2026, 1, 5)
    heavy = {"worker-crash": "worker-crash=0.08", "db-blip": "db-blip=0.03", "smtp-transient": "smtp-transient=0.4",
             "smtp-permanent": "smtp-permanent=0.3", "clock-restart": "clock-restart=0.8",
             "leftover-trigger": "leftover-trigger=0.2", "payment-race": "payment-race=0.5"}
    report = run(tmp_path, db_url, heavy.get(fault, fault), start=start)
    assert report.passed, report.to_text()
    assert report.faults_injected.get(fault, 0) > 0, report.faults_injected
    assert report.check.summary["due"] > 0


def test_all_faults_together_on_a_longer_run(tmp_path: Path, db_url: str) -> None:
    report = run(tmp_path, db_url, "all", days=21, start=date(2026, 2, 27))
    assert report.passed, report.to_text()
    assert report.check.summary["duplicates"] == 0 and report.check.summary["lost"] == 0
    assert len(report.faults_injected) >= 9


def test_same_seed_gives_the_same_fault_plan_and_report(tmp_path: Path) -> None:
    a = run(tmp_path / "a", None, "all", days=10).as_dict()
    b = run(tmp_path / "b", None, "all", days=10).as_dict()
    for r in (a, b):
        r.pop("wall_seconds")
        r.pop("database")
        r.pop("maildir")
    assert a == b
    c = run(tmp_path / "c", None, "all", days=10, seed=8).as_dict()
    assert c["faults_injected"] != a["faults_injected"] or c["summary"] != a["summary"]


def test_naive_design_shows_duplicates_under_the_same_faults(tmp_path: Path) -> None:
    report = run(tmp_path, None, "double-clock,worker-crash,payment-race", days=20, naive=True)
    assert report.passed and report.check.summary["duplicates"] == 0
    assert report.naive is not None and report.naive.duplicates > 0
    assert "naive" in report.to_text()


# --- the checker catches planted violations ---------------------------------------------------------------
@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, Path, dict[str, list[ScheduleDef]], dict[str, PaymentWindow]]:
    """A clean finished simulation on SQLite, copied so each test can damage it.

    Under collapse = "highest", so that superseded lower stages (in their top stage's row) exist to be damaged.
    """
    report = run(tmp_path, None, "none", days=15, policy=HIGHEST)
    assert report.passed
    db = tmp_path / "sim" / "oncebeat.db"
    return db, Path(report.maildir), {}, {}


def _check(db: Path, maildir: Path, policy: Policy | None = None):
    from oncebeat.app import App
    from oncebeat.simulate.standalone import check_deployment

    with open_store(f"sqlite:///{db}") as store:
        return check_deployment(store, App(), policy or HIGHEST, maildir=maildir)


def test_checker_passes_the_untouched_run(finished) -> None:
    db, maildir, _, _ = finished
    assert _check(db, maildir).passed


def test_checker_detects_a_message_delivered_twice(finished) -> None:
    db, maildir, _, _ = finished
    box = mailbox.Maildir(maildir, create=False)
    key = next(iter(box.keys()))
    box.add(box[key])
    report = _check(db, maildir)
    assert not report.invariants["no-duplicate-delivery"].passed


def test_checker_detects_a_lost_reminder(finished) -> None:
    db, maildir, _, _ = finished
    with open_store(f"sqlite:///{db}") as store, store.transaction() as tx:
        # the superseded stages a row records (reminders 0007) are reminders too: forgetting them loses them
        assert tx.execute("SELECT COUNT(*) AS n FROM reminders WHERE superseded_stages IS NOT NULL")[0]["n"] > 0
        tx.execute("UPDATE reminders SET superseded_stages = NULL WHERE id = "
                   "(SELECT MAX(id) FROM reminders WHERE superseded_stages IS NOT NULL)")
    report = _check(db, maildir)
    assert not report.invariants["due-reminders-terminal"].passed


def test_checker_detects_a_lost_reminder_row(finished) -> None:
    db, maildir, _, _ = finished
    with open_store(f"sqlite:///{db}") as store, store.transaction() as tx:
        tx.execute("DELETE FROM reminders WHERE id = (SELECT MAX(id) FROM reminders WHERE state = 'sent')")
    report = _check(db, maildir)
    assert not report.invariants["due-reminders-terminal"].passed


def test_checker_detects_a_stage_sent_before_the_lower_one_under_next(tmp_path: Path) -> None:
    report = run(tmp_path, None, "none", days=15)  # collapse = "next", the default
    assert report.passed, report.to_text()
    db, maildir = tmp_path / "sim" / "oncebeat.db", Path(report.maildir)
    assert _check(db, maildir, Policy()).passed
    with open_store(f"sqlite:///{db}") as store, store.transaction() as tx:
        tx.execute("UPDATE reminders SET stage = 7 WHERE id = (SELECT MIN(r.id) FROM reminders r WHERE r.stage = 1 "
                   "AND NOT EXISTS (SELECT 1 FROM reminders o WHERE o.invoice_id = r.invoice_id AND o.stage = 7))")
    report = _check(db, maildir, Policy())
    assert not report.invariants["no-unexpected-reminders"].passed
    assert not report.invariants["due-reminders-terminal"].passed


def test_checker_detects_a_wrong_skip_reason(finished) -> None:
    db, maildir, _, _ = finished
    with open_store(f"sqlite:///{db}") as store, store.transaction() as tx:
        tx.execute("UPDATE reminders SET state = 'skipped', reason = 'invoice paid on 2026-01-01' WHERE id = "
                   "(SELECT MIN(r.id) FROM reminders r JOIN invoices i ON i.id = r.invoice_id "
                   " WHERE r.state = 'sent' AND i.status = 'open')")
    report = _check(db, maildir)
    assert not report.invariants["skip-reasons-true"].passed


def test_checker_detects_a_second_job_for_an_occurrence(finished) -> None:
    db, maildir, _, _ = finished
    with open_store(f"sqlite:///{db}") as store, store.transaction() as tx:
        tx.execute("INSERT INTO jobs (queue, task, args, state, priority, attempt, max_attempts, run_at, "
                   "occurrence_id, source_kind, source_host, source_pid, source_name, source_version, errors, "
                   "created_at) SELECT queue, task, args, 'completed', priority, 1, max_attempts, run_at, "
                   "occurrence_id, 'cli', 'x', 1, 'x', '0', '[]', created_at FROM jobs "
                   "WHERE task = 'reminders.scan' LIMIT 1")
    report = _check(db, maildir)
    assert not report.invariants["one-job-per-occurrence"].passed


def test_checker_detects_a_sent_reminder_missing_from_the_maildir(finished) -> None:
    db, maildir, _, _ = finished
    shutil.rmtree(maildir / "new")
    (maildir / "new").mkdir()
    report = _check(db, maildir)
    assert not report.invariants["sent-matches-maildir"].passed


def test_simulate_cli_prints_json_with_invariants_and_faults(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    src = Path(__file__).resolve().parents[2] / "src"
    out = subprocess.run([sys.executable, "-m", "oncebeat.cli", "simulate", "--days", "5", "--faults",
                          "worker-crash=0.05,db-blip", "--json"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(src)}, timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["pass"] is True and set(data["invariants"]) >= {"no-duplicate-delivery", "due-reminders-terminal"}
    assert set(data["faults_injected"]) <= {"worker-crash", "db-blip"}


def test_a_run_queued_before_a_pause_runs_once_after_the_resume_in_the_simulator(tmp_path: Path, db_url: str) -> None:
    """Issue 22 item 2 over simulated days: each pause lands just after a fire (its run queued, unclaimed); the run
    starts only after the resume, once, and every invariant holds."""
    from datetime import UTC, datetime

    from oncebeat.audit import list_events
    from oncebeat.queue import all_jobs

    report = run(tmp_path, db_url, "pause=0.5")
    assert report.passed, report.to_text()
    assert report.faults_injected.get("pause", 0) >= 2, report.faults_injected
    with open_store(db_url) as store:
        events = [e for e in list_events(store, since=datetime(2020, 1, 1, tzinfo=UTC), subject="schedule:reminders")
                  if e["kind"] in ("schedule.paused", "schedule.resumed")]
        occurrences = {o["fire_at"]: o for o in store.read("list_occurrences", schedule_key="reminders")}
        jobs = all_jobs(store, task="reminders.scan")
    pairs = list(zip(events[::2], events[1::2], strict=True))
    assert pairs and all((p["kind"], r["kind"]) == ("schedule.paused", "schedule.resumed") for p, r in pairs)
    for paused, resumed in pairs:
        assert paused["detail"]["held_runs"] == 1 and resumed["detail"]["released_runs"] == 1
        occ = occurrences[paused["at"]]  # paused at its fire instant, after the clock enqueued its run
        [held] = [j for j in jobs if j["occurrence_id"] == occ["id"]]
        assert held["state"] == "completed" and held["attempt"] == 1
        assert held["started_at"] >= resumed["at"], "the held run did not start while the schedule was paused"
