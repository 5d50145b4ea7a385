"""The simulator with escalation and fees on (issue 24 item 4): CC and BCC on stages, a fixed and a capped percent
fee, an internal notice at the final stage, workers killed mid-send and a flaky relay; every due stage ends once,
at most one fee per (invoice, stage) of the pinned rule's amount, none lost, one internal notice per (invoice, final
stage). Both backends; and the invariants fail on a doubled fee, a fee of the wrong amount and a lost one."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from oncebeat.reminders.policy import Policy, policy_from_dict
from oncebeat.simulate import SimConfig, check, parse_faults, simulate
from oncebeat.simulate.checkladders import ladder_timeline
from oncebeat.store import open_store

FAULTS = "worker-crash=0.08,smtp-transient=0.15,payment-race"
POLICY: Policy = policy_from_dict({
    "reminders": {"stages": [1, 7, 14, 30], "notify_final": "Collections <collections@example.com>"},
    "stage": {"7": {"cc": ["Account Owner <owner@example.com>"]},
              "14": {"cc": ["owner@example.com"], "fee": {"fixed": 2500}},
              "30": {"cc": ["owner@example.com"], "bcc": ["archive@example.com"],
                     "fee": {"percent": 1.5, "cap": 5000}}},
}, "fees.toml")


def _run(tmp_path: Path, db_url: str | None, *, days: int = 90, invoices: int = 80, seed: int = 7):
    return simulate(SimConfig(days=days, start=date(2026, 1, 5), seed=seed, faults=parse_faults(FAULTS),
                              db_url=db_url, workdir=tmp_path / "sim", settle_days=1.5, invoices=invoices,
                              policy=POLICY))


def test_fees_and_the_final_notice_survive_crashes_and_retries_exactly_once(tmp_path: Path, db_url: str) -> None:
    # Seed 1 (6 fees, 2 final notices on SQLite): seed 7 charged one fee on main and none once the scan asked for
    # its report run (reminders.report_run), a job more per day for the worker-crash faults to draw on.
    report = _run(tmp_path, db_url, seed=1)
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"]) == (0, 0)
    once, lost, final = (report.check.invariants[n] for n in ("fee-once-per-stage", "fee-not-lost",
                                                                "final-notice-once"))
    assert s["fees"] == once.checked > 0 and lost.checked > 0 and final.checked > 0, report.to_text()
    assert any(k.startswith("worker-crash") for k in report.faults_injected), report.faults_injected
    print(f"fees {s['fees']}, internal notices {final.checked}, faults {report.faults_injected}")


def test_the_invariants_fail_on_a_second_fee_a_wrong_amount_and_a_lost_one(tmp_path: Path) -> None:
    # A seed whose run charges several fees (seed 2: 13). Seed 7 charged one once the done records' crash point
    # (effects.done_batch) joined what a worker crash can hit: the plan of faults changed, the invariants held.
    report = _run(tmp_path, None, seed=2)
    assert report.passed and report.check.summary["fees"] >= 2, report.to_text()
    db = f"sqlite:///{tmp_path / 'sim' / 'oncebeat.db'}"
    with open_store(db) as store:
        with store.transaction() as tx:  # damage the record as a broken send path would
            first, second = tx.execute("SELECT invoice_id, stage FROM reminder_fees ORDER BY invoice_id, stage")[:2]
            tx.execute("UPDATE reminder_fees SET amount = amount + 1 WHERE invoice_id = ? AND stage = ?",
                       (first["invoice_id"], first["stage"]))
            tx.execute("DELETE FROM reminder_fees WHERE invoice_id = ? AND stage = ?",
                       (second["invoice_id"], second["stage"]))
            # a fee for a stage that was never sent nor has a rule
            tx.execute("INSERT INTO reminder_fees (invoice_id, stage, reminder_id, amount, currency, basis, rule, "
                       "created_at) SELECT invoice_id, stage + 1000, reminder_id, amount, currency, basis, rule, ? "
                       "FROM reminder_fees WHERE invoice_id = ? AND stage = ?",
                       (datetime.now(UTC).isoformat(), first["invoice_id"], first["stage"]))
        again = check(store, maildir=Path(report.maildir), stages=POLICY.stages, collapse=POLICY.collapse,
                      definitions={}, payments={}, ladders=ladder_timeline(store, POLICY))
    once, lost = again.invariants["fee-once-per-stage"], again.invariants["fee-not-lost"]
    text = " | ".join(once.examples + lost.examples)
    assert once.violations >= 2 and lost.violations >= 2, text
    assert "but the pinned rule gives" in text and "none is recorded" in text and "the record says" in text, text
