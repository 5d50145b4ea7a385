"""Ground truth from the real programs: `doctor --logs` on logs that Celery 5, Clockwork 3, Active Job 6.1 and
Sidekiq 6 wrote themselves (tests/fixtures/logs/real, produced by its scripts/run_scenarios.py; NOTES.md says how).

Each scenario's truth.json lists what the driver did (a second beat, a restart inside the fire minute, a cron
`celery call`, a Heroku Scheduler job, retries after a sent mail, a zone fixed mid-week) and the runs that
overlapped by the jobs' own record; the doctor reads only the log text. The table in docs/doctor-logs.md is
`scripts/score.py`'s output; this test fails when precision or recall over all scenarios falls below 0.95.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from oncebeat.doctor.logs import diagnose_logs

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
sys.path.insert(0, str(REAL / "scripts"))
from score import Score, scenarios, score, table  # noqa: E402

SCENARIOS = scenarios()


def test_there_is_a_scenario_of_each_stack() -> None:
    names = {p.name for p in SCENARIOS}
    assert {"celery-journald", "celery-logfile-retries", "heroku-clockwork-sidekiq",
            "clockwork-sidekiq-plain-utc"} <= names
    for p in SCENARIOS:
        assert (p / "truth.json").exists() and (REAL / "NOTES.md").read_text().count(p.name) >= 1


def test_precision_and_recall_over_the_real_program_logs_are_at_least_0_95() -> None:
    scores = [score(p) for p in SCENARIOS]
    truth = sum(len(s.truth) for s in scores)
    found = sum(len(s.found) for s in scores)
    hits = sum(len(s.true_positive) for s in scores)
    report = table(scores) + "".join(f"\nfalse {s.scenario} {f}" for s in scores for f in sorted(s.false, key=str))
    report += "".join(f"\nmissed {s.scenario} {m}" for s in scores for m in sorted(s.missed, key=str))
    assert truth >= 15, report
    assert hits / found >= 0.95, report
    assert hits / truth >= 0.95, report


def test_the_table_in_the_docs_is_the_measured_one() -> None:
    scores = [score(p) for p in SCENARIOS]
    docs = (Path(__file__).resolve().parents[2] / "docs" / "doctor-logs.md").read_text()
    assert table(scores) in docs


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_each_finding_quotes_the_log_at_its_file_and_line(scenario: Path) -> None:
    doc = json.loads((scenario / "truth.json").read_text())
    report = diagnose_logs([scenario / f for f in doc["files"]], tz=doc["tz"], log_tz=doc["log_tz"])
    assert report.findings
    for f in report.findings:
        assert f.finding.evidence, f.finding.summary
        for e in f.finding.evidence:
            text = Path(e.data["file"]).read_text(encoding="utf-8").splitlines()[e.data["line"] - 1]
            assert e.data["raw"] == text


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_one_read_and_two_reads_give_the_same_findings(scenario: Path) -> None:
    doc = json.loads((scenario / "truth.json").read_text())
    files = [scenario / f for f in doc["files"]]
    once = diagnose_logs(files, tz=doc["tz"], log_tz=doc["log_tz"], two_reads=False)
    twice = diagnose_logs(files, tz=doc["tz"], log_tz=doc["log_tz"])
    assert [f.finding.summary for f in once.findings] == [f.finding.summary for f in twice.findings]


def test_retry_side_effects_count_the_mails_the_apps_logged_in_their_own_words() -> None:
    s: Score = score(REAL / "heroku-clockwork-sidekiq")
    assert {t for t in s.truth if t[0] == "retry-side-effect"} <= s.true_positive
    doc = json.loads((REAL / "heroku-clockwork-sidekiq" / "truth.json").read_text())
    report = diagnose_logs([REAL / "heroku-clockwork-sidekiq" / "heroku.log"], tz=doc["tz"])
    retries = [f for f in report.findings if f.finding.code == "retry-side-effect"]
    assert retries and all("mail(s)" in f.finding.summary and "0 mail(s)" not in f.finding.summary.split(";")[0]
                           for f in retries)
