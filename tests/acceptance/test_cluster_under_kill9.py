"""Reminders on real OS processes: 2 clocks and 4 workers on PostgreSQL, SIGKILLed and restarted at random."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncebeat.simulate.processes import run_processes


@pytest.mark.slow
@pytest.mark.postgres
def test_two_clocks_and_four_workers_killed_at_random_never_send_twice_or_lose(tmp_path: Path, pg_db_url: str) -> None:
    report = run_processes(pg_db_url, tmp_path, seconds=25, settle=12, kill_every=2.0, seed=11)
    assert report.passed, report.to_text()
    assert report.kills["worker"] > 0 and report.kills["clock"] > 0
    summary = report.check.summary
    assert summary["duplicates"] == 0 and summary["lost"] == 0
    assert summary["messages_delivered"] > 0 and summary["due"] > 0
