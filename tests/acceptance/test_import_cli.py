"""`oncebeat import` on raw exports people actually have, read in place from the shared sample data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_data

from oncebeat.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"
CHINOOK = shared_data("chinook") / "csv" / "Invoice.csv"
RETAIL = shared_data("online_retail") / "online_retail_invoices.csv.gz"


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600)


@pytest.mark.skipif(not CHINOOK.exists(), reason=f"Chinook sample data not found at {CHINOOK}")
def test_a_raw_chinook_export_imports_in_one_command(tmp_path: Path, db_url: str) -> None:
    result = oncebeat("import", str(CHINOOK), "--db", db_url, "--date-format", "%Y-%m-%d %H:%M:%S",
                      "--currency", "USD", "--due-days", "30",
                      "--map", "invoice_number=template:CHINOOK-{InvoiceId},amount_due=Total,issued_on=InvoiceDate",
                      "--map", "customer_email=template:customer-{CustomerId}@billing.example.test",
                      "--map", "customer_name=template:Customer {CustomerId}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "customers: 59, invoices: 412, new: 412" in result.stdout
    with open_store(db_url) as store:
        first = next(r for r in store.read("list_invoices") if r["number"] == "CHINOOK-1")
    assert (first["email"], first["currency"], first["amount_due"]) == ("customer-2@billing.example.test", "USD", 198)
    assert (first["issued_on"].isoformat(), first["due_on"].isoformat()) == ("2021-01-01", "2021-01-31")


@pytest.mark.skipif(not RETAIL.exists(), reason=f"Online Retail sample data not found at {RETAIL}")
def test_a_large_real_export_shows_a_summary_the_first_50_errors_and_writes_all_to_the_errors_file(
        tmp_path: Path, db_url: str) -> None:
    result = oncebeat("import", str(RETAIL), "--db", db_url, "--date-format", "%Y-%m-%d %H:%M:%S", "--due-days", "30",
                      "--map", "invoice_number=InvoiceNo,amount_due=Total,issued_on=InvoiceDate",
                      "--map", "customer_email=template:customer-{CustomerID}@billing.example.test",
                      "--map", "customer_name=template:Customer {CustomerID}",
                      "--skip-invalid", "rejects.csv", "--errors-file", "errors.txt", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # PROVENANCE.md: 18,532 billable invoices (type invoice, a customer, total > 0) from 4,338 customers
    assert "customers: 4338, invoices: 18532" in result.stdout and "rejected: 7368" in result.stdout
    shown = [line for line in result.stderr.splitlines() if line.startswith("  online_retail_invoices.csv.gz:")]
    errors = (tmp_path / "errors.txt").read_text(encoding="utf-8").splitlines()
    assert len(shown) == 50 and shown == ["  " + e for e in errors[:50]]
    assert f"… and {len(errors) - 50:,} more problem(s) (all {len(errors):,} are in errors.txt)" in result.stderr
    assert any("is negative" in e for e in errors) and any("is zero" in e for e in errors)
    assert any("is computed from CustomerID, which is empty" in e for e in errors)
    assert "applying 18,532 invoices" in result.stderr


def test_rejected_imports_print_50_problems_and_the_count_without_applying(tmp_path: Path, db_url: str) -> None:
    rows = "".join(f"INV-{n},c{n}@example.test,C,USD,0,2026-01-01,2026-01-31\n" for n in range(120))
    (tmp_path / "zero.csv").write_text("invoice_number,customer_email,customer_name,currency,amount_due,issued_on,"
                                       "due_on\n" + rows, encoding="utf-8")
    result = oncebeat("import", "zero.csv", "--db", db_url, "--errors-file", "all.txt", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert sum(1 for line in result.stderr.splitlines() if "column amount_due: '0' is zero" in line) == 50
    assert "… and 70 more problem(s) (all 120 are in all.txt)" in result.stderr
    assert len((tmp_path / "all.txt").read_text(encoding="utf-8").splitlines()) == 120
    with open_store(db_url) as store:
        assert store.read("count_invoices") == []


def test_us_dates_in_a_payments_file_and_a_bad_date_format_option(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "inv.csv").write_text("invoice_number,customer_email,customer_name,currency,amount_due,issued_on,"
                                      "due_on\nINV-1,a@example.test,A,USD,10,2026-01-01,2026-01-31\n", encoding="utf-8")
    (tmp_path / "pay.csv").write_text("invoice_number,paid_on\nINV-1,2/3/2026\n", encoding="utf-8")
    assert oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    paid = oncebeat("import", "--payments", "pay.csv", "--date-format", "mdy", "--db", db_url, cwd=tmp_path)
    assert paid.returncode == 0 and "marked_paid: 1" in paid.stdout, paid.stderr
    bad = oncebeat("import", "inv.csv", "--date-format", "%Y", "--db", db_url, cwd=tmp_path)
    assert bad.returncode == 2 and "--date-format: '%Y' has no month and no day" in bad.stderr
