"""The simulator with the per-customer cap and the payment-freshness fence (issue 23 items 4, 5 and 7): the cap on,
the payment import stopped for 2 days (fault stale-import) with the fence on, crashes and SMTP faults — 0
duplicates, 0 lost, each (invoice, stage) ended once in order, no customer over the cap in any 7 days; and the
checker's cap rules can fail."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from oncebeat.app import App
from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import open_store

FAULTS = "stale-import,late-import=0.5,payment-race,worker-crash=0.01,smtp-transient=0.05,holds=0.2"
CAPPED = Policy(max_notices_per_week=1, max_payment_staleness="6h")


def _run(tmp_path: Path, db_url: str | None, faults: str, *, days: int, policy: Policy, invoices: int = 120,
         seed: int = 11):
    # settle long enough for every deferred notice's next allowed day to come
    return simulate(SimConfig(days=days, start=date(2026, 1, 5), seed=seed, faults=parse_faults(faults),
                              db_url=db_url, workdir=tmp_path / "sim", settle_days=45, invoices=invoices,
                              policy=policy))


def test_two_simulated_months_with_the_cap_and_a_stale_import_loses_nothing_and_never_exceeds_the_cap(
        tmp_path: Path, db_url: str) -> None:
    report = _run(tmp_path, db_url, FAULTS, days=60, policy=CAPPED)
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"], report.check.invariants["stage-order"].violations) == (0, 0, 0)
    assert report.faults_injected["stale-import"] == 1
    assert s["cap_deferred"] >= 5, s  # the cap did defer notices
    assert s["max_notices_in_7_days"] == 1, s
    for name in ("cap-per-customer", "deferred-then-sent", "stage-order", "due-reminders-terminal"):
        assert report.check.invariants[name].checked > 0, name
        assert report.check.invariants[name].passed, name
    with open_store(db_url) as store:
        rows = store.read("list_reminders")
    capped = [r for r in rows if r["capped_at"] is not None]
    # Every capped notice ended, except one deferred in the settle's last week: its next allowed day (at most 7 days
    # on, the cap being per week) comes after the simulation's end (2026-01-05 + 60 + 45 days), and the checker's
    # due-reminders-terminal invariant (passed above) already judged it not yet due.
    end = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(days=60 + 45)
    late = [r for r in capped if r["state"] == "deferred"]
    assert all(r["capped_at"] > end - timedelta(days=7) for r in late), late
    assert capped and {r["state"] for r in capped} - {"deferred"} <= {"sent", "skipped", "held", "failed", "in_doubt"}
    assert any(r["state"] == "sent" for r in capped)  # deferred, then sent


def test_without_the_cap_customers_get_several_notices_a_week(tmp_path: Path) -> None:
    """The same book without a cap: the checker counts more than one notice in some 7 days (the cap is real)."""
    report = _run(tmp_path, None, "stale-import", days=60, policy=Policy(), invoices=80, seed=3)
    assert report.passed, report.to_text()
    assert report.check.summary["max_notices_in_7_days"] > 1
    assert report.check.summary["cap_deferred"] == 0


@pytest.fixture
def capped_run(tmp_path: Path) -> tuple[Path, Path]:
    report = _run(tmp_path, None, "stale-import", days=60, policy=CAPPED, invoices=80, seed=3)
    assert report.passed, report.to_text()
    assert report.check.summary["cap_deferred"] > 0
    return tmp_path / "sim" / "oncebeat.db", Path(report.maildir)


def _damage_and_check(db: Path, maildir: Path, sql: str):
    with open_store(f"sqlite:///{db}") as store:
        with store.transaction() as tx:
            assert tx.execute(sql + " RETURNING id"), "nothing to damage"
        return check_deployment(store, App(), CAPPED, maildir=maildir)


def test_checker_detects_a_deferred_notice_sent_before_its_next_allowed_day(capped_run: tuple[Path, Path]) -> None:
    # the notice went out the day it was deferred: before the day its cap sentence named
    report = _damage_and_check(*capped_run, "UPDATE reminders SET sent_at = capped_at WHERE id = (SELECT MIN(id) "
                                            "FROM reminders WHERE capped_at IS NOT NULL AND state = 'sent')")
    assert not report.invariants["deferred-then-sent"].passed


def test_checker_detects_two_notices_to_one_customer_in_seven_days(capped_run: tuple[Path, Path]) -> None:
    # a second sent notice of a customer moved to the day after the first one
    report = _damage_and_check(*capped_run, """
        UPDATE reminders SET sent_at = (
            SELECT datetime(r2.sent_at, '+1 day') FROM reminders r2 JOIN invoices i2 ON i2.id = r2.invoice_id
            WHERE r2.state = 'sent'
              AND i2.customer_id = (SELECT customer_id FROM invoices WHERE id = reminders.invoice_id)
              AND r2.id <> reminders.id ORDER BY r2.sent_at LIMIT 1)
        WHERE id = (SELECT MAX(r.id) FROM reminders r JOIN invoices i ON i.id = r.invoice_id WHERE r.state = 'sent'
                    AND (SELECT COUNT(*) FROM reminders x JOIN invoices y ON y.id = x.invoice_id
                         WHERE x.state = 'sent' AND y.customer_id = i.customer_id) > 1)""")
    assert not report.invariants["cap-per-customer"].passed
