"""Re-imports never reopen paid invoices, out-of-range data is an internal error (exit 2) not a finding,
and replays apply payments on the business day."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from oncebeat.app import App
from oncebeat.reminders.policy import Policy
from oncebeat.sample import run_demo
from oncebeat.simulate import SimConfig, parse_faults, simulate
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"
HEAD = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on"
INVOICES = HEAD + "\nINV-1,ana@example.test,Ana,USD,10.00,2026-01-01,2026-01-31\n"


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600)


def invoice(db_url: str) -> dict[str, object]:
    with open_store(db_url) as store:
        (row,) = store.read("list_invoices")
    return row


def test_a_stale_reimport_keeps_a_paid_invoice_paid_and_says_so(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "inv.csv").write_text(INVOICES, encoding="utf-8")
    (tmp_path / "pay.csv").write_text("invoice_number,paid_on\nINV-1,2026-02-03\n", encoding="utf-8")
    assert oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    assert oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    paid_at = invoice(db_url)["paid_at"]
    assert paid_at is not None
    again = oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path)
    assert again.returncode == 0 and "kept paid: 1" in again.stdout, again.stdout
    row = invoice(db_url)
    assert (row["status"], str(row["paid_on"]), row["paid_at"]) == ("paid", "2026-02-03", paid_at)


def test_only_a_status_dated_after_the_payment_or_reopen_reopens_a_paid_invoice(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "inv.csv").write_text(INVOICES, encoding="utf-8")
    (tmp_path / "pay.csv").write_text("invoice_number,paid_on\nINV-1,2026-02-03\n", encoding="utf-8")
    assert oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    assert oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    line = "INV-1,ana@example.test,Ana,USD,10.00,2026-01-01,2026-01-31,open,{}\n"
    (tmp_path / "old.csv").write_text(HEAD + ",status,status_on\n" + line.format("2026-02-03"), encoding="utf-8")
    old = oncebeat("import", "old.csv", "--db", db_url, cwd=tmp_path)
    assert "kept paid: 1" in old.stdout and invoice(db_url)["status"] == "paid"
    (tmp_path / "new.csv").write_text(HEAD + ",status,status_on\n" + line.format("2026-02-10"), encoding="utf-8")
    new = oncebeat("import", "new.csv", "--db", db_url, cwd=tmp_path)
    assert "kept paid: 0" in new.stdout
    row = invoice(db_url)
    assert (row["status"], row["paid_on"], row["paid_at"]) == ("open", None, None)
    assert oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    forced = oncebeat("import", "inv.csv", "--reopen", "--db", db_url, cwd=tmp_path)
    assert "kept paid: 0" in forced.stdout and invoice(db_url)["status"] == "open"


def test_a_payment_dated_before_its_invoice_is_refused_and_nothing_applied(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "inv.csv").write_text(INVOICES, encoding="utf-8")
    (tmp_path / "pay.csv").write_text("invoice_number,paid_on\nINV-1,2025-12-31\n", encoding="utf-8")
    assert oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    early = oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path)
    assert early.returncode == 2 and "column paid_on: '2025-12-31' is before the invoice was issued" in early.stderr
    assert invoice(db_url)["status"] == "open"


def test_check_exits_2_on_an_internal_error_not_1_which_means_a_violation(tmp_path: Path, db_url: str) -> None:
    report = simulate(SimConfig(days=3, start=date(2026, 1, 5), seed=3, faults=parse_faults("none"), db_url=db_url,
                                workdir=tmp_path / "sim", settle_days=1.0, invoices=20))
    assert report.passed
    fine = oncebeat("check", "--db", db_url, cwd=tmp_path)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    # A placeholder due date written before imports were bounded (bypassing the importer).
    with open_store(db_url) as store:
        first = store.read("list_invoices")[0]
        with store.transaction() as tx:
            tx.run("upsert_invoice", number=first["number"], customer_email=first["email"], currency="USD",
                   amount_due=100, issued_on=date(2026, 1, 1), due_on=date(9999, 12, 31), status="open",
                   paid_on=None, status_on=None, reopen=False, now=datetime(2026, 1, 8, tzinfo=UTC),
                   payment_url=None, payment_url_given=0, pdf_path=None, pdf_path_given=0,
                   payment_source=None)
    broken = oncebeat("check", "--db", db_url, cwd=tmp_path)
    assert broken.returncode == 2, broken.stdout + broken.stderr
    assert "internal error (OverflowError" in broken.stderr and "Traceback" not in broken.stderr
    doctor = oncebeat("doctor", "--db", db_url, cwd=tmp_path)
    assert "Traceback" not in doctor.stderr, doctor.stderr


@pytest.mark.parametrize("zone", ["America/Chicago", "America/Los_Angeles", "Pacific/Auckland"])
def test_a_payment_dated_d_stops_ds_reminder_whatever_the_zone(tmp_path: Path, zone: str) -> None:
    # Due 2026-01-09: stage 1 is due on the 10th's 08:00 run. Paid on the 10th → never sent, in every zone;
    # the same payment at an exact paid_at after that run → sent first (an exact replay).
    (tmp_path / "inv.csv").write_text(HEAD + "\nINV-1,ana@example.test,Ana,USD,10.00,2026-01-01,2026-01-09\n"
                                      "INV-2,bo@example.test,Bo,USD,10.00,2026-01-01,2026-01-09\n", encoding="utf-8")
    (tmp_path / "pay.csv").write_text("invoice_number,paid_on,paid_at\nINV-1,2026-01-10,\n"
                                      "INV-2,2026-01-10,2026-01-10T20:00:00" + _offset(zone) + "\n", encoding="utf-8")
    result = run_demo(workdir=tmp_path / "demo", days=5, invoices_csv=tmp_path / "inv.csv",
                      payments_csv=tmp_path / "pay.csv", policy=Policy(tz=zone, stages=(1, 7)),
                      start=date(2026, 1, 8))
    assert (result.duplicates, result.lost) == (0, 0)
    with open_store(f"sqlite:///{result.database}") as store:
        sent = {r["number"] for r in store.read("list_reminders") if r["state"] == "sent"}
        check = check_deployment(store, App(), Policy(tz=zone, stages=(1, 7)), maildir=Path(result.maildir))
    assert sent == {"INV-2"}
    assert check.passed, check.to_text()


def _offset(zone: str) -> str:
    return {"America/Chicago": "-06:00", "America/Los_Angeles": "-08:00", "Pacific/Auckland": "+13:00"}[zone]


def test_check_counts_the_same_due_reminders_as_simulate_on_the_same_database(tmp_path: Path, db_url: str) -> None:
    report = simulate(SimConfig(days=12, start=date(2026, 1, 5), seed=11, db_url=db_url, workdir=tmp_path / "sim",
                                faults=parse_faults("payment-race=0.5,worker-crash=0.05"), settle_days=1.5,
                                invoices=60))
    assert report.passed, report.to_text()
    with open_store(db_url) as store:
        check = check_deployment(store, App(), Policy(), maildir=Path(report.maildir))
    assert check.passed, check.to_text()
    assert check.summary["due"] == report.check.summary["due"] > 0
