"""Small rough edges of the command line, each as a user meets it: real subprocesses, real databases."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.service import ReminderService
from oncebeat.store import open_store
from oncebeat.timebase import SystemClock

ROOT = Path(__file__).resolve().parents[2]


def oncebeat(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_mailsink_on_a_busy_port_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = oncebeat("mailsink", "--maildir", "maildir", "--port", str(port), cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"Error: mailsink: 127.0.0.1:{port} is already in use (another mailsink?); stop it or pick a free port "
        "with --port N"]


def test_trigger_before_any_clock_ran_syncs_the_definitions_itself(tmp_path: Path, db_url: str) -> None:
    result = oncebeat("trigger", "reminders", "--db", db_url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("triggered ")
    with open_store(db_url) as store:
        [schedule] = store.read("list_schedules")
        [occurrence] = store.read("list_occurrences", schedule_key="reminders")
    assert (schedule["key"], occurrence["outcome"]) == ("reminders", "manual")


def test_trigger_of_a_key_nobody_defines_names_the_defined_keys(tmp_path: Path, db_url: str) -> None:
    result = oncebeat("trigger", "remindrs", "--db", db_url, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no schedule 'remindrs': not defined by this app (defined: reminders)" in result.stderr


def test_preview_shows_line_breaks_in_an_invoice_number_escaped(tmp_path: Path, db_url: str) -> None:
    with open_store(db_url) as store:
        store.migrate()
        today = SystemClock().now().astimezone(Policy().zone).date()
        ReminderService(store, Policy(), clock=SystemClock()).upsert(
            [Customer(email="ana@example.test", name="Ana")],
            [Invoice(number="INV-1\r\nFAKE-LINE", customer_email="ana@example.test", currency="USD",
                     amount_due=1_000, issued_on=today - timedelta(days=40), due_on=today - timedelta(days=10))])
    result = oncebeat("preview", "--db", db_url, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not any(line.startswith("FAKE-LINE") for line in lines), result.stdout
    assert any(line.startswith("  INV-1\\r\\nFAKE-LINE stage 1") for line in lines), result.stdout


def test_the_package_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] == "MIT"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
