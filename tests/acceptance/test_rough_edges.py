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


def test_cancelling_a_job_that_does_not_exist_or_cannot_be_cancelled_is_an_error(tmp_path: Path, db_url: str) -> None:
    from oncebeat.provenance import current_source
    from oncebeat.queue import Queue

    with open_store(db_url) as store:
        store.migrate()
        q = Queue(store, clock=SystemClock(), source=current_source("api"))
        job_id = q.enqueue("noop")
    missing = oncebeat("jobs", "--cancel", "999999", "--db", db_url, cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "job 999999 does not exist" in missing.stderr
    first = oncebeat("jobs", "--cancel", str(job_id), "--db", db_url, cwd=tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == f"job {job_id}: cancelled"
    again = oncebeat("jobs", "--cancel", str(job_id), "--db", db_url, cwd=tmp_path)
    assert again.returncode == 2 and f"job {job_id} is cancelled and cannot be cancelled" in again.stderr


def test_demo_output_piped_has_no_progress_line(tmp_path: Path) -> None:
    result = oncebeat("demo", "--days", "2", "--dir", str(tmp_path / "demo"), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "simulated days" not in result.stderr  # the bar's label, once, on a pipe: noise in logs
    assert "oncebeat demo: 2 simulated days" in result.stdout


def test_doctor_logs_with_nothing_to_judge_says_so_and_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    noise = tmp_path / "noise.log"
    noise.write_text("hello\nthis is not a log line anyone knows\n")
    for path in (empty, noise):
        result = oncebeat("doctor", "--logs", str(path), cwd=tmp_path)
        assert result.returncode == 2, result.stdout
        assert "nothing judged: no scheduled job was found" in result.stdout
        assert "no findings" not in result.stdout


def test_a_paused_schedule_lists_no_next_fires(tmp_path: Path, db_url: str) -> None:
    assert oncebeat("schedules", "pause", "reminders", "--db", db_url, cwd=tmp_path).returncode == 0
    listed = oncebeat("schedules", "--db", db_url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "next " not in listed.stdout
    assert "paused: nothing fires until `oncebeat schedules resume reminders`" in listed.stdout
    assert oncebeat("schedules", "resume", "reminders", "--db", db_url, cwd=tmp_path).returncode == 0
    assert "    next " in oncebeat("schedules", "--db", db_url, cwd=tmp_path).stdout


def test_a_password_with_unencoded_reserved_characters_is_named_not_misparsed(tmp_path: Path) -> None:
    for char, encoded in (("#", "%23"), ("/", "%2F"), ("?", "%3F"), ("@", "%40")):
        url = f"postgresql://app:Mark{char}er9Secret@127.0.0.1:5432/test"
        result = oncebeat("doctor", "--db", url, cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"percent-encode them ('{char}' as {encoded})" in result.stderr
        assert "could not be cast" not in result.stderr and "resolve host" not in result.stderr
        for piece in ("Mark", "er9Secret"):
            assert piece not in result.stdout + result.stderr
