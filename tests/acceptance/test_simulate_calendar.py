"""The simulator with a business calendar (issue 23 items 3 and 7): US holidays (Thanksgiving, Christmas, New
Year) and weekends, stage days in calendar and business days, holds and faults, on both backends; and the
checker's no-send-on-non-business-day rule can fail."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from oncebeat.app import App
from oncebeat.reminders.calendar import calendar_config
from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import open_store

FAULTS = "holds=0.5,late-import=0.5,payment-race,worker-crash=0.01,smtp-transient=0.05"
LADDER = (-3, 1, 4, 7, 14)


def _policy(stage_days: str, collapse: str = "next") -> Policy:
    cal = calendar_config({"country": "US", "stage_days": stage_days, "send_window": "07:00-18:00"}, source="test")
    return Policy(stages=LADDER, collapse=collapse, calendar=cal)


def _run(tmp_path: Path, db_url: str | None, policy: Policy, *, days: int, seed: int = 5):
    # 2 November 2026: Thanksgiving, Christmas and New Year's Day inside the first 60 days
    return simulate(SimConfig(days=days, start=date(2026, 11, 2), seed=seed, faults=parse_faults(FAULTS),
                              db_url=db_url, workdir=tmp_path / "sim", settle_days=1.5, invoices=120, policy=policy))


@pytest.mark.parametrize(("stage_days", "collapse"), [("calendar", "next"), ("business", "highest")])
def test_a_simulated_year_with_a_calendar_sends_nothing_on_a_holiday_or_weekend(
        tmp_path: Path, db_url: str, stage_days: str, collapse: str) -> None:
    policy = _policy(stage_days, collapse)
    report = _run(tmp_path, db_url, policy, days=365)
    assert report.passed, report.to_text()
    s = report.check.summary
    assert (s["duplicates"], s["lost"], report.check.invariants["stage-order"].violations) == (0, 0, 0)
    assert report.check.invariants["no-send-on-non-business-day"].checked > 50
    with open_store(db_url) as store:
        rows = store.read("list_reminders")
    assert policy.calendar is not None
    assert rows and all(policy.calendar.is_business_day(r["business_date"]) for r in rows)
    invoices = {i["number"]: i for i in store_invoices(db_url)}
    if stage_days == "calendar":  # some stage was really moved (its nominal date a weekend day or a holiday)
        moved = [r for r in rows if policy.calendar.late_reason(invoices[r["number"]]["due_on"], r["stage"],
                                                                r["business_date"])]
    else:  # some stage went out on its business-day date, not on due_on + N
        moved = [r for r in rows if r["business_date"] == policy.calendar.nominal(invoices[r["number"]]["due_on"],
                                                                                   r["stage"])
                 != invoices[r["number"]]["due_on"] + timedelta(days=r["stage"])]
    assert len(moved) >= 5, len(moved)


def store_invoices(db_url: str) -> list[dict]:
    with open_store(db_url) as store:
        return store.read("list_invoices")


def test_checker_detects_a_reminder_created_on_a_holiday(tmp_path: Path) -> None:
    policy = _policy("calendar")
    report = _run(tmp_path, None, policy, days=90, seed=3)
    assert report.passed, report.to_text()
    with open_store(f"sqlite:///{tmp_path / 'sim' / 'oncebeat.db'}") as store:
        with store.transaction() as tx:
            assert tx.execute("UPDATE reminders SET business_date = '2026-12-25' WHERE id = "
                              "(SELECT MAX(id) FROM reminders) RETURNING id")
        damaged = check_deployment(store, App(), policy, maildir=Path(report.maildir))
    assert not damaged.invariants["no-send-on-non-business-day"].passed
    assert "Christmas Day (US)" in damaged.invariants["no-send-on-non-business-day"].examples[0]
