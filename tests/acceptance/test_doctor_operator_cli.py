"""An operator's own actions through the real `oncebeat` command are information in the doctor, not warnings;
and with send_zone = "customer" and the cron `init` writes, the clock records and the doctor compares one
definition (issue 21 item 6). Real subprocesses, both backends."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"


def oncebeat(*args: str, cwd: Path, db_url: str, terminal: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the command; with ``terminal`` its stdin is a pseudo-terminal, as when a person types it."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "USER": "ana"}
    env.pop("SUDO_USER", None)
    if not terminal:
        return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args, "--db", db_url], cwd=cwd, env=env,
                              text=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    leader, follower = pty.openpty()
    try:
        return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args, "--db", db_url], cwd=cwd, env=env,
                              text=True, capture_output=True, timeout=120, stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)


def init(cwd: Path) -> None:
    """`oncebeat init`: the commented oncebeat.toml with the default policy."""
    subprocess.run([sys.executable, "-m", "oncebeat.cli", "init"], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(SRC)})


def leftover_lines(doctor_stdout: str) -> list[str]:
    return [line for line in doctor_stdout.splitlines() if "leftover-trigger:" in line]


def test_trigger_and_rerun_from_the_cli_are_the_operators_and_leave_no_warning(tmp_path: Path, db_url: str) -> None:
    init(tmp_path)
    ticked = oncebeat("tick", cwd=tmp_path, db_url=db_url)  # a registered oncebeat process on this host
    assert ticked.returncode == 0, ticked.stderr
    unattended = oncebeat("trigger", "reminders", cwd=tmp_path, db_url=db_url)
    assert unattended.returncode == 0, unattended.stderr
    typed = oncebeat("trigger", "reminders", cwd=tmp_path, db_url=db_url, terminal=True)
    assert typed.returncode == 0, typed.stderr
    with open_store(db_url) as store:
        first = store.read("list_occurrences", schedule_key="reminders")[-1]
    assert first["outcome"] == "manual"
    assert oncebeat("jobs", "--cancel", str(first["job_id"]), cwd=tmp_path, db_url=db_url).returncode == 0
    rerun = oncebeat("occurrences", "rerun", str(first["id"]), cwd=tmp_path, db_url=db_url)
    assert rerun.returncode == 0, rerun.stderr

    doctor = oncebeat("doctor", cwd=tmp_path, db_url=db_url)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    lines = leftover_lines(doctor.stdout)
    assert [line.split()[0] for line in lines] == ["INFO", "INFO"], doctor.stdout
    assert lines[0].startswith("INFO    leftover-trigger: schedule reminders: triggered it 2 times by an operator "
                               "through the CLI (oncebeat trigger on ")
    assert "user ana, with and without a terminal" in lines[0]
    assert f"re-ran occurrence {first['id']} by an operator through the CLI" in lines[1]
    report: dict[str, Any] = json.loads(oncebeat("doctor", "--json", cwd=tmp_path, db_url=db_url).stdout)
    operators = [e for f in report["findings"] if f["code"] == "leftover-trigger" for e in f["evidence"]
                 if e["kind"] == "note"]
    assert sorted((e["action"], e["via"], e["user"], e["terminal"]) for e in operators) == [
        ("re-ran", "cli", "ana", False), ("triggered", "cli", "ana", False), ("triggered", "cli", "ana", True)]
    assert {f["severity"] for f in report["findings"] if f["code"] == "leftover-trigger"} == {"info"}


def test_send_zone_customer_with_the_cron_init_writes_is_one_definition_for_clock_and_doctor(
        tmp_path: Path, db_url: str) -> None:
    init(tmp_path)
    toml = tmp_path / "oncebeat.toml"
    text = toml.read_text(encoding="utf-8")
    assert 'cron = "0 8 * * *"' in text and 'send_zone = "schedule"' in text
    toml.write_text(text.replace('send_zone = "schedule"', 'send_zone = "customer"'), encoding="utf-8")

    assert oncebeat("tick", cwd=tmp_path, db_url=db_url).returncode == 0  # the clock records the definition
    listed = oncebeat("schedules", cwd=tmp_path, db_url=db_url)
    assert "reminders: */15 * * * * in America/Chicago" in listed.stdout, listed.stdout
    doctor = oncebeat("doctor", cwd=tmp_path, db_url=db_url)
    assert doctor.returncode == 0 and leftover_lines(doctor.stdout) == [], doctor.stdout
    assert "another definition" not in doctor.stdout

    # the derived expression is never stored over the written one: the demo's --send-zone schedule gets the file's
    # own 08:00 cron back (it kept the quarter-hourly scan before)
    demo = subprocess.run([sys.executable, "-m", "oncebeat.cli", "demo", "--days", "1", "--dir", "demo",
                           "--send-zone", "schedule"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert demo.returncode == 0, demo.stderr
    assert "schedule '0 8 * * *' in America/Chicago" in demo.stdout, demo.stdout
