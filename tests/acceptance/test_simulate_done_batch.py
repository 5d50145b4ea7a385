"""The simulator's worker-crash fault at the new crash point ``done_batch`` (issue 27): a worker dies while the
done records of its sends are being written; their keys end in doubt (counted in the in-doubt budget), nothing is
sent twice or lost. The simulator's workers drain serially, so each such write carries one record; several
records in one write are covered by tests/backends/test_done_batch.py and test_done_batch_processes.py.
Seed 1: its plan hits ``done_batch`` twice (seed 7 did until db-blip's draws stopped moving the crash draws)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from oncebeat.reminders.policy import Policy
from oncebeat.simulate import SimConfig, parse_faults
from oncebeat.simulate.runner import _Sim


def test_workers_killed_while_writing_done_records_leave_those_keys_in_doubt_and_every_invariant_holding(
        tmp_path: Path, db_url: str) -> None:
    sim = _Sim(SimConfig(days=10, start=date(2026, 1, 5), seed=1, faults=parse_faults("worker-crash=0.08"),
                         db_url=db_url, workdir=tmp_path / "sim", compare_naive=False, settle_days=1.5, invoices=60,
                         policy=Policy()))
    report = sim.run()
    assert report.passed, report.to_text()
    assert sim.injected["worker-crash:done_batch"] > 0, sim.injected
    summary = report.check.summary
    assert summary["duplicates"] == 0 and summary["lost"] == 0
    assert 0 < summary["in_doubt"] <= sim.doubt_budget, (summary, sim.doubt_budget)
