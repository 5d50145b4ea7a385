"""The simulator with one notice per customer (issue 24 item 1): ``group = "customer"``, crashes, lost replies,
payment races and holds, with and without the cap — 0 duplicates, 0 lost, notices that group several invoices,
and the checker's notice rules can fail."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from oncebeat.reminders.policy import Policy, policy_from_dict
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.checknotices import check_notices

FAULTS = "worker-crash=0.02,smtp-transient=0.05,payment-race,holds=0.2,leftover-trigger,late-import=0.5"


def test_two_simulated_months_of_grouped_notices_lose_nothing_and_send_nothing_twice(tmp_path: Path,
                                                                                       db_url: str) -> None:
    policy = Policy(stages=(1, 7, 14, 30), group="customer", max_notices_per_week=2)
    report = simulate(SimConfig(days=60, start=date(2026, 1, 5), seed=11, faults=parse_faults(FAULTS),
                                db_url=db_url, workdir=tmp_path / "sim", settle_days=30, invoices=150,
                                policy=policy))
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"]) == (0, 0)
    inv = report.check.invariants
    for name in ("one-notice-per-customer-day", "notice-delivered-once", "notice-never-lists-paid",
                 "cap-per-customer"):
        assert inv[name].checked > 0 and inv[name].violations == 0, (name, report.to_text())
    assert s["grouped_notices"] > 0
    sent = s["reminders"].get("sent", 0)
    assert s["messages_delivered"] < sent, s  # some notices carried several invoices: fewer emails than rows


class _Inv:
    def __init__(self) -> None:
        self.checked = 0
        self.examples: list[str] = []

    def fail(self, example: str) -> None:
        self.examples.append(example)


def test_the_notice_rules_fail_on_a_stale_listing_a_duplicate_notice_and_a_sent_row_of_an_unsent_notice() -> None:
    from datetime import UTC, datetime

    frozen = datetime(2026, 3, 2, 14, tzinfo=UTC)
    row = {"customer_id": 1, "business_date": date(2026, 3, 2), "ladder_version_id": 1, "frozen_at": frozen,
           "notice_message_id": "<n1@x>", "stage": 1, "message_id": "<n1@x>"}
    notices = [row | {"notice_id": 1, "notice_state": "sent", "reminder_id": 10, "state": "sent", "number": "A"},
               row | {"notice_id": 2, "notice_state": "in_doubt", "reminder_id": 11, "state": "sent", "number": "B",
                      "notice_message_id": "<n2@x>"}]
    inv = {name: _Inv() for name in ("one-notice-per-customer-day", "notice-delivered-once",
                                     "notice-never-lists-paid")}
    check_notices(inv, notices=notices, messages=[],  # type: ignore[arg-type]
                  payments={"A": (frozen.replace(hour=10), frozen.replace(hour=11))})
    assert inv["one-notice-per-customer-day"].examples  # two notices for customer 1 on 2026-03-02
    assert any("B stage 1 is sent but its notice is in_doubt" in e for e in inv["notice-delivered-once"].examples)
    assert any("delivered 0 times" in e for e in inv["notice-delivered-once"].examples)
    assert any("A stage 1 is listed, but the invoice was paid" in e for e in inv["notice-never-lists-paid"].examples)


GROUPED_FEES = policy_from_dict({
    "reminders": {"stages": [1, 7, 14, 30], "group": "customer", "max_notices_per_week": 2,
                  "notify_final": "Collections <collections@example.com>"},
    "stage": {"7": {"cc": ["Account Owner <owner@example.com>"]},
              "14": {"cc": ["owner@example.com"], "fee": {"fixed": 2500}},
              "30": {"cc": ["owner@example.com"], "bcc": ["archive@example.com"],
                     "fee": {"percent": 1.5, "cap": 5000}}},
    "attachments": {"statement": "always"},
}, "grouped-fees.toml")


def test_grouped_notices_with_cc_bcc_fees_and_the_final_notice_lose_nothing_and_record_each_fee_once(
        tmp_path: Path, db_url: str) -> None:
    report = simulate(SimConfig(days=60, start=date(2026, 1, 5), seed=11, faults=parse_faults(FAULTS),
                                db_url=db_url, workdir=tmp_path / "sim", settle_days=30, invoices=150,
                                policy=GROUPED_FEES))
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"]) == (0, 0)
    inv = report.check.invariants
    for name in ("notice-delivered-once", "fee-once-per-stage", "fee-not-lost", "final-notice-once",
                 "attachments-as-frozen"):
        assert inv[name].checked > 0 and inv[name].violations == 0, (name, report.to_text())
    assert s["grouped_notices"] > 0 and s["fees"] > 0
    assert s["messages_delivered"] < s["reminders"].get("sent", 0), s  # grouped: fewer emails than rows
    print(f"rows sent {s['reminders'].get('sent')}, emails {s['messages_delivered']}, fees {s['fees']}, "
          f"internal notices {inv['final-notice-once'].checked}")


def test_the_fee_and_file_rules_read_a_grouped_notice_and_fail_on_a_lost_fee_or_a_regenerated_file(tmp_path: Path) -> None:
    from oncebeat.simulate import check  # noqa: PLC0415
    from oncebeat.simulate.checkladders import ladder_timeline  # noqa: PLC0415
    from oncebeat.store import open_store  # noqa: PLC0415

    report = simulate(SimConfig(days=45, start=date(2026, 1, 5), seed=11, faults=parse_faults("none"),
                                db_url=None, workdir=tmp_path / "sim", settle_days=30, invoices=80,
                                policy=GROUPED_FEES))
    assert report.passed and report.check.invariants["fee-not-lost"].checked >= 2, report.to_text()
    with open_store(f"sqlite:///{tmp_path / 'sim' / 'oncebeat.db'}") as store:
        with store.transaction() as tx:  # damage the record as a broken grouped send path would
            first, second = tx.execute("SELECT invoice_id, stage FROM reminder_fees ORDER BY invoice_id, stage")[:2]
            tx.execute("UPDATE reminder_fees SET amount = amount + 1 WHERE invoice_id = ? AND stage = ?",
                       (first["invoice_id"], first["stage"]))
            tx.execute("DELETE FROM reminder_fees WHERE invoice_id = ? AND stage = ?",
                       (second["invoice_id"], second["stage"]))
            # a statement regenerated on a retry instead of the frozen one: the recorded digests differ
            tx.execute("UPDATE reminder_attachments SET sha256 = 'regenerated'")
        again = check(store, maildir=Path(report.maildir), stages=GROUPED_FEES.stages,
                      collapse=GROUPED_FEES.collapse, definitions={}, payments={},
                      ladders=ladder_timeline(store, GROUPED_FEES), attachments=GROUPED_FEES.attachments)
    lost = again.invariants["fee-not-lost"]
    text = " | ".join(lost.examples)
    assert "none is recorded" in text and "the record says" in text and "notice:" in text, text
    files = again.invariants["attachments-as-frozen"]
    assert files.checked > 0 and any(e.startswith("notice ") and "differ from those frozen" in e
                                     for e in files.examples), files.examples
