"""The simulator with attachments (issue 24 item 3): a ladder whose every stage carries a statement of account,
workers killed mid-send and a flaky relay; every due stage still ends exactly once, and every delivered reminder
carries, byte for byte, the statement frozen at its first attempt (``attachments-as-frozen``), retried and taken
over sends included. Both backends; and the invariant fails on a delivery whose files differ from the frozen."""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path

from oncebeat.effects import list_effects
from oncebeat.reminders.notices.attachments import AttachmentPolicy
from oncebeat.reminders.notices.sending import attachment_digests
from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, check, parse_faults, simulate
from oncebeat.store import open_store

FAULTS = "worker-crash=0.08,smtp-transient=0.15,payment-race"
POLICY = Policy(attachments=AttachmentPolicy(statement="always"))


def _run(tmp_path: Path, db_url: str | None, *, days: int = 90, invoices: int = 80, seed: int = 5):
    return simulate(SimConfig(days=days, start=date(2026, 1, 5), seed=seed, faults=parse_faults(FAULTS),
                              db_url=db_url, workdir=tmp_path / "sim", settle_days=1.5, invoices=invoices,
                              policy=POLICY))


def test_statements_survive_crashes_and_retries_exactly_once_with_the_frozen_bytes(tmp_path: Path,
                                                                                   db_url: str) -> None:
    report = _run(tmp_path, db_url)
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"]) == (0, 0)
    frozen = report.check.invariants["attachments-as-frozen"]
    assert frozen.checked == s["messages_delivered"] > 0 and frozen.passed, frozen.as_dict()
    assert any(k.startswith("worker-crash") for k in report.faults_injected), report.faults_injected
    with open_store(db_url) as store:
        digests = attachment_digests(store)
        effects = {e["key"]: e for e in list_effects(store)}
        final = store.read("reminders_page", number=None, email=None, state="sent", after_id=0, limit=100_000)
    final_sent = list(final)
    assert final_sent and all(len(digests.get(int(r["id"]), [])) == 1 for r in final_sent)  # one statement each
    # A statement-carrying send that a crash or a refused relay made retry: its statement is still the first frozen one.
    retried = [r for r in final_sent if (effects.get(f"reminder:{r['id']}") or {}).get("attempt", 1) > 1]
    print(f"statement reminders sent {len(final_sent)}, of them retried {len(retried)}")
    assert retried, "no statement-carrying send was retried: pick a seed whose faults hit one"


def test_the_invariant_fails_when_a_delivered_statement_is_not_the_frozen_one(tmp_path: Path) -> None:
    report = _run(tmp_path, None, days=50, invoices=20, seed=2)
    assert report.passed and report.check.invariants["attachments-as-frozen"].checked > 0, report.to_text()
    db = f"sqlite:///{tmp_path / 'sim' / 'oncebeat.db'}"
    with open_store(db) as store:
        with store.transaction() as tx:  # as if a retry had sent a regenerated statement: the record differs
            assert tx.execute("UPDATE reminder_attachments SET sha256 = ? WHERE position = 0 RETURNING reminder_id",
                              (hashlib.sha256(b"regenerated").hexdigest(),)), "nothing to damage"
        again = check(store, maildir=Path(report.maildir), stages=POLICY.stages, collapse=POLICY.collapse,
                      definitions={}, payments={}, attachments=POLICY.attachments)
    bad = again.invariants["attachments-as-frozen"]
    assert not bad.passed and "differ from those frozen at the first attempt" in bad.examples[0], bad.as_dict()
