"""The simulator with holds (issue 23 item 7): promises kept and broken, disputes opened and closed (also between a
scan and its sends), customer holds — a simulated year on both backends, and the checker's hold rules can fail."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oncebeat.app import App
from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import open_store

YEAR_FAULTS = "holds=0.5,late-import=0.5,payment-race,worker-crash=0.01,smtp-transient=0.05"


def _run(tmp_path: Path, db_url: str | None, faults: str, *, days: int, invoices: int = 120, seed: int = 11):
    return simulate(SimConfig(days=days, start=date(2026, 1, 5), seed=seed, faults=parse_faults(faults),
                              db_url=db_url, workdir=tmp_path / "sim", settle_days=1.5, invoices=invoices,
                              policy=Policy()))


def test_a_simulated_year_with_holds_has_no_duplicate_nothing_lost_and_no_stage_out_of_order(
        tmp_path: Path, db_url: str) -> None:
    report = _run(tmp_path, db_url, YEAR_FAULTS, days=365)
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"], report.check.invariants["stage-order"].violations) == (0, 0, 0)
    assert report.faults_injected["holds"] >= 20, report.faults_injected
    assert s["holds"] >= 20 and s["reminders"].get("held", 0) >= 10, s
    for name in ("held-by-a-hold", "no-send-while-held", "stage-order", "resume-marked"):
        assert report.check.invariants[name].checked > 0, name
    with open_store(db_url) as store:
        rows = store.read("list_reminders")
    assert sum(1 for r in rows if r["resumes_hold_id"] is not None) > 0  # broken promises and releases resumed


@pytest.fixture
def held_run(tmp_path: Path) -> tuple[Path, Path]:
    report = _run(tmp_path, None, "holds=0.5,late-import=0.5", days=120, invoices=80, seed=3)
    assert report.passed, report.to_text()
    return tmp_path / "sim" / "oncebeat.db", Path(report.maildir)


def _damage_and_check(db: Path, maildir: Path, sql: str):
    with open_store(f"sqlite:///{db}") as store:
        with store.transaction() as tx:
            assert tx.execute(sql + " RETURNING id"), "nothing to damage"
        return check_deployment(store, App(), Policy(), maildir=maildir)


def test_checker_detects_a_stage_sent_while_a_hold_covered_it(held_run: tuple[Path, Path]) -> None:
    # a stage the scan recorded held, its hold placed strictly before (a dispute opened mid-send shares its instant)
    report = _damage_and_check(*held_run, "UPDATE reminders SET state = 'sent', sent_at = updated_at, hold_id = NULL "
                                          "WHERE id = (SELECT MIN(r.id) FROM reminders r JOIN reminder_holds h "
                                          "ON h.id = r.hold_id WHERE r.state = 'held' AND h.created_at < r.updated_at)")
    assert not report.invariants["no-send-while-held"].passed


def test_checker_detects_a_held_stage_naming_a_hold_of_another_invoice(held_run: tuple[Path, Path]) -> None:
    report = _damage_and_check(*held_run, "UPDATE reminders SET hold_id = (SELECT MAX(h.id) FROM reminder_holds h "
                                          "WHERE h.invoice_id IS NOT NULL AND h.invoice_id <> reminders.invoice_id) "
                                          "WHERE id = (SELECT MIN(id) FROM reminders WHERE state = 'held')")
    assert not report.invariants["held-by-a-hold"].passed


def test_checker_detects_a_higher_stage_dated_before_a_lower_one(held_run: tuple[Path, Path]) -> None:
    report = _damage_and_check(*held_run, "UPDATE reminders SET business_date = '2020-01-01' WHERE id = "
                                          "(SELECT MIN(r.id) FROM reminders r WHERE EXISTS (SELECT 1 FROM reminders o "
                                          "WHERE o.invoice_id = r.invoice_id AND o.stage < r.stage))")
    assert not report.invariants["stage-order"].passed


def test_checker_detects_a_missed_promise_the_email_does_not_mention(held_run: tuple[Path, Path]) -> None:
    # a reminder the invariant judges (not held or pending): in seed 3's run the first one marking a resumed hold is
    # a held stage since db-blip's draws stopped moving the other faults' (the plan changed; the checker did not)
    report = _damage_and_check(*held_run, "UPDATE reminders SET resumes_hold_id = NULL WHERE id = "
                                          "(SELECT MIN(id) FROM reminders WHERE resumes_hold_id IS NOT NULL "
                                          "AND state NOT IN ('held', 'pending'))")
    assert not report.invariants["resume-marked"].passed
