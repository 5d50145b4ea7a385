"""`oncebeat doctor` after simulations: each injected cause named with evidence; a clean run passes."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from oncebeat.doctor import run_doctor
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.store import open_store


def _doctor(tmp_path: Path, faults: str, days: int = 14):
    report = simulate(SimConfig(days=days, start=date(2026, 3, 2), faults=parse_faults(faults), workdir=tmp_path,
                                invoices=60, settle_days=1.5))
    assert report.passed, report.to_text()
    with open_store(f"sqlite:///{tmp_path / 'oncebeat.db'}") as store:
        return report, run_doctor(store, now=datetime(2026, 4, 1, tzinfo=UTC), maildir=tmp_path / "maildir")


def test_doctor_names_each_injected_cause_after_a_simulation_with_all_faults(tmp_path: Path) -> None:
    sim, doc = _doctor(tmp_path, "all,worker-crash=0.05,clock-restart=0.6,leftover-trigger=0.1")
    codes = {f.code for f in doc.findings}
    assert {"multiple-clocks", "clock-restart", "leftover-trigger", "retry-side-effect", "timezone"} <= codes
    if sim.check.summary["in_doubt"]:
        assert "in-doubt" in codes and doc.exit_code == 1
    clocks = doc.by_code("multiple-clocks")[0]
    assert any(e.kind == "process" for e in clocks.evidence) and clocks.fix
    leftover = doc.by_code("leftover-trigger")
    assert any("old-cron-host" in e.text for f in leftover for e in f.evidence)
    tz = doc.by_code("timezone")
    assert any("Pacific/Kiritimati" in f.summary or any("Kiritimati" in e.text for e in f.evidence) for f in tz)


def test_doctor_reports_all_checks_passed_after_a_clean_simulation(tmp_path: Path) -> None:
    _, doc = _doctor(tmp_path, "none", days=10)
    assert doc.exit_code == 0
    assert all(f.severity == "info" for f in doc.findings)
    assert "all checks passed" in doc.to_text()
