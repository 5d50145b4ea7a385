"""Ground truth for `doctor --logs`: the naive design's logs written by the simulator under injected faults.

The simulator knows which cause it injected on which day (from the naive run's trace, never from the logs);
the log doctor, reading only the log text, must find every one of them with evidence lines and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

from oncebeat.doctor.logs import diagnose_logs
from oncebeat.reminders.policy import Policy
from oncebeat.sample import DEFAULT_DEMO_START, generate_book
from oncebeat.simulate.emitlogs import FORMATS, emit_logs, score_logs
from oncebeat.simulate.faults import parse_faults
from oncebeat.simulate.naive import run_naive
from oncebeat.simulate.runner import HOST_TZ

SRC = Path(__file__).resolve().parents[2] / "src"
NAIVE_FAULTS = "clock-restart,double-clock,leftover-trigger,worker-crash,db-blip,host-tz"


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600)


def assert_evidence_quotes_the_log(finding: dict[str, Any], log: Path) -> None:
    lines = log.read_text(encoding="utf-8").splitlines()
    assert finding["evidence"], finding["summary"]
    for ev in finding["evidence"]:
        assert ev["kind"] == "log" and ev["file"] == str(log)
        assert lines[ev["line"] - 1] == ev["raw"]  # file:line points at the very line quoted
        assert ev["text"].startswith(f"{log}:{ev['line']}  ")
        assert ev["at"]["utc"].endswith("Z") and ev["at"]["tz"] == "America/Chicago"


def test_simulate_emits_naive_logs_in_which_the_doctor_finds_every_injected_cause_and_no_other(tmp_path: Path) -> None:
    sim = oncebeat("simulate", "--days", "21", "--seed", "11", "--faults", NAIVE_FAULTS, "--compare-naive",
                   "--emit-logs", "heroku-sidekiq", "heroku", "--emit-logs", "celery", "celery", "--dir", "sim",
                   cwd=tmp_path)
    assert sim.returncode == 0, sim.stderr
    assert "the naive design's logs: heroku/heroku.log" in sim.stdout
    for folder, name in (("heroku", "heroku"), ("celery", "celery")):
        log = tmp_path / folder / f"{name}.log"
        truth = json.loads((tmp_path / folder / f"{name}.truth.json").read_text(encoding="utf-8"))
        expected = {(e["code"], e["day"]) for e in truth["expected"]}
        assert {c for c, _ in expected} == {"multiple-clocks", "clock-restart", "leftover-trigger", "retry-side-effect",
                                            "concurrent-run", "timezone"}
        doctor = oncebeat("doctor", "--logs", str(log), "--tz", "America/Chicago", "--json", cwd=tmp_path)
        assert doctor.returncode == 1, doctor.stderr
        report = json.loads(doctor.stdout)
        assert {(f["code"], f["day"]) for f in report["findings"]} == expected
        for f in report["findings"]:
            assert_evidence_quotes_the_log(f, log)
        per_day = {d["day"]: d for d in report["days"]}
        assert len(per_day) == 21 and all(d["enqueued"] >= 2 for d in per_day.values())  # a second clock each day


def test_emit_logs_needs_compare_naive(tmp_path: Path) -> None:
    result = oncebeat("simulate", "--days", "2", "--emit-logs", "celery", "out", "--dir", "sim", cwd=tmp_path)
    assert result.returncode == 2 and "--compare-naive" in result.stderr and "Traceback" not in result.stderr


CASES = [(1, NAIVE_FAULTS), (2, "clock-restart,leftover-trigger,worker-crash=0.05,db-blip=0.05"), (3, "all")]


@pytest.mark.parametrize(("seed", "faults"), CASES, ids=[f"seed{s}" for s, _ in CASES])
def test_a_simulated_year_of_naive_logs_gives_full_precision_and_recall(tmp_path: Path, seed: int,
                                                                        faults: str) -> None:
    spec = parse_faults(faults)
    policy = Policy() if "dst" not in spec else replace(Policy(), schedule="30 2 * * *")  # as the simulator does
    host = HOST_TZ if "host-tz" in spec else None
    start = datetime.combine(DEFAULT_DEMO_START, time(0), tzinfo=UTC)
    book = generate_book(seed=seed, start=DEFAULT_DEMO_START, invoices=200, customers=40)
    naive = run_naive(book, policy, faults=spec, seed=seed, start=start, end=start + timedelta(days=365),
                      workdir=tmp_path, host_tz=host)
    codes: Counter[str] = Counter()
    for fmt in FORMATS:
        truth = emit_logs(naive.trace, fmt, tmp_path / fmt, tz=policy.tz, host_tz=host, seed=seed, faults=spec)
        score = score_logs(tmp_path / fmt / truth["log"], truth)
        assert (score["missed"], score["false"]) == ([], []), (fmt, score["missed"][:5], score["false"][:5])
        assert score["precision"] == score["recall"] == 1.0 and score["expected"] > 300
        codes.update(e["code"] for e in truth["expected"])
    assert {"clock-restart", "leftover-trigger", "retry-side-effect"} <= set(codes)


def test_without_faults_the_naive_logs_give_no_finding(tmp_path: Path) -> None:
    start = datetime.combine(DEFAULT_DEMO_START, time(0), tzinfo=UTC)
    book = generate_book(seed=5, start=DEFAULT_DEMO_START, invoices=60, customers=12)
    naive = run_naive(book, Policy(), faults={}, seed=5, start=start, end=start + timedelta(days=60), workdir=tmp_path,
                      host_tz=None)
    for fmt in FORMATS:
        truth = emit_logs(naive.trace, fmt, tmp_path / fmt, tz="America/Chicago", host_tz=None, seed=5, faults={})
        report = diagnose_logs([tmp_path / fmt / truth["log"]], tz="America/Chicago")
        assert truth["expected"] == [] and report.findings == () and report.exit_code == 0
        assert all(d.enqueued == 1 == d.performed for d in report.days) and len(report.days) == 60
