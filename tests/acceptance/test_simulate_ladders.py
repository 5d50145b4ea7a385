"""The simulator with ladders: an edit mid-run with and without --apply-to-open, customers moving segments; the
checker proves no duplicate, none lost and no stage out of order from each invoice's pinned ladder versions."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oncebeat.reminders.pinning import holdings
from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.ladderfaults import SIM_LADDERS
from oncebeat.store import open_store


def _run(tmp_path: Path, db_url: str, faults: str, *, days: int = 24):
    return simulate(SimConfig(days=days, start=date(2026, 1, 5), seed=11, faults=parse_faults(faults),
                              db_url=db_url, workdir=tmp_path / "sim", settle_days=1.5, invoices=80))


@pytest.mark.parametrize("apply", ["0", "1"])
def test_a_ladder_edit_mid_run_with_and_without_apply_and_segment_moves_keep_every_invariant(
        tmp_path: Path, db_url: str, apply: str) -> None:
    report = _run(tmp_path, db_url, f"ladder-edit={apply},segment-move=0.3")
    assert report.passed, report.to_text()
    summary = report.check.summary
    assert summary["duplicates"] == 0 and summary["lost"] == 0 and summary["due"] > 0
    for name in ("stage-order", "reminder-on-pinned-ladder", "stage-recorded-once"):
        assert report.check.invariants[name].passed and report.check.invariants[name].checked > 0, name
    assert report.faults_injected["segment-move"] > 0
    with open_store(db_url) as store:
        held = holdings(store, Policy(ladders=SIM_LADDERS))
    versions = {(h.name, h.version) for h in held}
    assert {("default", 1), ("default", 2), ("large", 1), ("large", 2), ("german", 1), ("german", 2)} <= versions
    on_old = sum(h.open_invoices for h in held if h.version == 1)
    if apply == "1":
        assert report.faults_injected["ladder-apply"] == 3 and on_old == 0
    else:
        assert report.faults_injected.get("ladder-apply", 0) == 0 and on_old > 0  # still on the version they began
