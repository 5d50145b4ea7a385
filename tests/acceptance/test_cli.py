"""The `oncebeat` command as a user runs it: real subprocesses, real files, real databases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_data

from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"
SHARED = shared_data("chinook")


def oncebeat(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **(env or {})}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=full_env, text=True,
                          capture_output=True, timeout=timeout)


BAD_CSV = """invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on
INV-1,ana@example.com,Ana,USD,10.00,2026-01-01,2026-01-31
INV-2,bo@example.com,Bo,USD,10.00,2026-01-01,2026-02-30
INV-3,cy@example.com,Cy,XYZ,10.00,2026-01-01,2026-01-31
INV-1,di@example.com,Di,USD,10.00,2026-01-01,2026-01-31
INV-5,,Ed,USD,10.00,2026-01-01,2026-01-31
"""


def test_import_with_bad_rows_reports_each_with_its_line_and_imports_nothing(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "invoices.csv").write_text(BAD_CSV, encoding="utf-8")
    result = oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert "invoices.csv:3: column due_on: '2026-02-30'" in err
    assert "invoices.csv:4: column currency: 'XYZ'" in err
    assert "invoices.csv:5: column invoice_number" in err and "line 2" in err
    assert "invoices.csv:6: column customer_email" in err
    assert "Traceback" not in err
    with open_store(db_url) as store:
        assert store.read("count_invoices") == []


def test_import_skip_invalid_applies_valid_rows_and_writes_rejects(tmp_path: Path, db_url: str) -> None:
    valid = "INV-7,gil@example.com,Gil,EUR,99.95,2026-01-02,2026-02-01\n"
    (tmp_path / "invoices.csv").write_text(BAD_CSV + valid, encoding="utf-8")
    result = oncebeat("import", "invoices.csv", "--db", db_url, "--skip-invalid", "rejects.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rejects = (tmp_path / "rejects.csv").read_text(encoding="utf-8").splitlines()
    # lines 2-6 are rejected: 2 and 5 share an invoice number, 3-4 and 6 are invalid
    assert rejects[0].endswith(",error") and len(rejects) == 1 + 5
    assert all(row.split(",")[0] != "INV-7" for row in rejects)
    with open_store(db_url) as store:
        (row,) = store.read("list_invoices")
    assert (row["number"], row["amount_due"], row["currency"]) == ("INV-7", 9995, "EUR")


def test_import_upserts_and_payments_mark_invoices_paid(tmp_path: Path, db_url: str) -> None:
    good = BAD_CSV.splitlines()[:2]
    (tmp_path / "invoices.csv").write_text("\n".join(good) + "\n", encoding="utf-8")
    (tmp_path / "payments.csv").write_text("invoice_number,paid_on\nINV-1,2026-02-03\n", encoding="utf-8")
    assert oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    again = oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path)
    assert "new: 0" in again.stdout and "updated: 1" in again.stdout
    paid = oncebeat("import", "--payments", "payments.csv", "--db", db_url, cwd=tmp_path)
    assert paid.returncode == 0 and "marked_paid: 1" in paid.stdout
    with open_store(db_url) as store:
        (row,) = store.read("list_invoices")
    assert (row["status"], row["paid_on"].isoformat()) == ("paid", "2026-02-03")


def test_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    result = oncebeat("migrate", "--db", "postgresql://nobody:secret@127.0.0.1:1/none", cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot connect to postgresql://nobody:***@127.0.0.1:1/none" in result.stderr
    assert "secret" not in result.stderr and "Traceback" not in result.stderr


def test_schedules_next_prints_dst_shifted_instants_as_json(tmp_path: Path) -> None:
    result = oncebeat("schedules", "next", "30 2 * * *", "--tz", "America/Chicago",
                      "--after", "2026-03-07T00:00:00Z", "--count", "3", "--json", cwd=tmp_path)
    assert json.loads(result.stdout) == ["2026-03-07T02:30:00-06:00", "2026-03-08T03:00:00-05:00",
                                         "2026-03-09T02:30:00-05:00"]


def test_bad_zone_and_bad_cron_field_are_named(tmp_path: Path) -> None:
    zone = oncebeat("schedules", "next", "0 8 * * *", "--tz", "America/Chicgo", cwd=tmp_path)
    assert zone.returncode == 2 and "America/Chicgo" in zone.stderr and "America/Chicago" in zone.stderr
    cron = oncebeat("schedules", "next", "0 25 * * *", "--tz", "UTC", cwd=tmp_path)
    assert cron.returncode == 2 and "hour field" in cron.stderr


def test_demo_json_on_the_seeded_book_has_no_duplicates_and_nothing_lost(tmp_path: Path) -> None:
    result = oncebeat("demo", "--json", "--days", "45", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["duplicates"] == 0 and summary["lost"] == 0
    assert summary["messages_delivered"] == summary["reminders"]["sent"] > 50
    assert set(summary) >= {"invoices", "reminders", "messages_delivered", "duplicates", "lost", "in_doubt"}


@pytest.mark.skipif(not SHARED.exists(), reason=f"Chinook sample data not found at {SHARED}")
def test_demo_runs_on_the_chinook_invoices(tmp_path: Path) -> None:
    convert = subprocess.run([sys.executable, "-m", "oncebeat.sample.book", "chinook", "chinook.csv",
                              "--data", str(SHARED), "--payments", "payments.csv"], cwd=tmp_path, text=True,
                             capture_output=True, env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120)
    assert convert.returncode == 0, convert.stderr
    result = oncebeat("demo", "--json", "--invoices", "chinook.csv", "--payments", "payments.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["invoices"] == 412
    assert summary["duplicates"] == 0 and summary["lost"] == 0 and summary["messages_delivered"] > 0


def test_payments_for_unknown_invoices_are_rejected_and_nothing_is_applied(tmp_path: Path, db_url: str) -> None:
    good = BAD_CSV.splitlines()[:2]
    (tmp_path / "invoices.csv").write_text("\n".join(good) + "\n", encoding="utf-8")
    (tmp_path / "payments.csv").write_text("invoice_number,paid_on\nINV-1,2026-02-03\nINV-999,2026-02-03\n",
                                           encoding="utf-8")
    assert oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    paid = oncebeat("import", "--payments", "payments.csv", "--db", db_url, cwd=tmp_path)
    assert paid.returncode == 2 and "nothing was imported" in paid.stderr
    assert "payments.csv:3: column invoice_number: 'INV-999' is not a known invoice" in paid.stderr
    with open_store(db_url) as store:
        (row,) = store.read("list_invoices")
    assert row["status"] == "open"


def test_read_only_commands_do_not_create_a_database_for_a_mistyped_path(tmp_path: Path) -> None:
    for command in (["jobs"], ["aging"], ["preview"], ["effects", "list"], ["check"], ["doctor"]):
        result = oncebeat(*command, "--db", f"sqlite:///{tmp_path}/typo/x.db", cwd=tmp_path)
        assert result.returncode == 2, (command, result.stderr)
        assert "no database at" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "typo").exists()


def test_a_password_in_a_url_without_scheme_is_never_printed(tmp_path: Path) -> None:
    db = oncebeat("migrate", "--db", "user:S3cretPW@host/db", cwd=tmp_path)
    smtp = oncebeat("worker", "--db", f"sqlite:///{tmp_path}/x.db", cwd=tmp_path,
                    env={"SMTP_URL": "user:Pa55word@host:25"})
    for result in (db, smtp):
        assert result.returncode == 2
        assert "S3cretPW" not in result.stderr + result.stdout and "Pa55word" not in result.stderr + result.stdout


def test_demo_refuses_to_delete_a_folder_it_did_not_create(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("precious", encoding="utf-8")
    result = oncebeat("demo", "--days", "1", "--dir", ".", cwd=tmp_path)
    assert result.returncode == 2 and "not created by oncebeat" in result.stderr
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "precious"


def test_check_refuses_a_maildir_that_does_not_exist_instead_of_reporting_every_email_lost(tmp_path: Path) -> None:
    result = oncebeat("check", "--db", f"sqlite:///{tmp_path}/x.db", "--maildir", str(tmp_path / "typo"),
                      cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "does not exist" in result.stderr and "violation" not in result.stdout


@pytest.mark.parametrize(("option", "value"), [("--lease", "0"), ("--lease", "-1"), ("--lease", "nan"), ("--lease", "inf"),
                                               ("--grace", "nan"), ("--grace", "-5"), ("--rescue-interval", "0"),
                                               ("--rescue-interval", "nan"), ("--lease", "1e12")])
def test_worker_durations_must_be_finite_positive_seconds(tmp_path: Path, option: str, value: str) -> None:
    result = oncebeat("worker", "--burst", "--db", f"sqlite:///{tmp_path / 'w.db'}", option, value, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"Invalid value for '{option}'" in result.stderr and "give a number of seconds" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_schedules_set_refuses_a_catchup_window_that_is_not_finite_seconds(tmp_path: Path, value: str) -> None:
    result = oncebeat("schedules", "set", "reminders", "--catchup-window", value,
                      "--db", f"sqlite:///{tmp_path / 'w.db'}", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Invalid value for '--catchup-window'" in result.stderr and "Traceback" not in result.stderr


def test_jobs_refuses_a_state_that_does_not_exist(tmp_path: Path) -> None:
    from oncebeat.cli import JOB_STATES
    from oncebeat.queue import JOB_STATES as ENGINE_STATES

    assert JOB_STATES == ENGINE_STATES  # the CLI's copy of the engine's states
    result = oncebeat("jobs", "--state", "bogus", "--db", f"sqlite:///{tmp_path / 'w.db'}", cwd=tmp_path)
    assert result.returncode == 2 and "Invalid value for '--state'" in result.stderr, result.stderr
    assert "'bogus' is not one of" in result.stderr and "Traceback" not in result.stderr


def test_the_sample_book_module_runs_without_a_runtime_warning(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    result = subprocess.run([sys.executable, "-W", "error", "-m", "oncebeat.sample.book", "generate", "--help"],
                            cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_a_database_url_with_a_trailing_newline_works_and_a_fragment_is_refused(tmp_path: Path, db_url: str) -> None:
    """Issue 21 item 10: '…db\\n' made a SQLite file named 'x.db\\n' (and printed an empty line for the URL);
    '#frag' was appended to the last PostgreSQL connection option."""
    done = oncebeat("migrate", cwd=tmp_path, env={"DATABASE_URL": db_url + "\n"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(db_url.split("?")[0]) and "\n:" not in done.stdout
    assert not [p for p in tmp_path.rglob("*") if "\n" in p.name]
    with_password = db_url.replace("postgresql://postgres@", "postgresql://postgres:S3cretPw@")
    refused = oncebeat("jobs", cwd=tmp_path, env={"DATABASE_URL": with_password + "#frag"})
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "has a '#fragment', which means nothing to a database" in refused.stderr
    assert "S3cretPw" not in refused.stderr + refused.stdout
