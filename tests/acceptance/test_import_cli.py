"""`oncebeat import` on raw exports people actually have, read in place from the shared sample data."""

from __future__ import annotations

import csv
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


INVOICE_HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"


def _invoices_paid(db_url: str) -> dict[str, str]:
    with open_store(db_url) as store:
        return {r["number"]: r["status"] for r in store.read("list_invoices")}


def test_one_bad_payment_row_names_its_line_and_skip_invalid_applies_the_rest(tmp_path: Path, db_url: str) -> None:
    """Issue 21 item 8: an unknown invoice number blocked every payment, wrote no rejects and named no line."""
    (tmp_path / "inv.csv").write_text(INVOICE_HEADER + "".join(
        f"INV-{n},c{n}@example.test,C {n},USD,10,2026-01-10,2026-02-10\n" for n in (1, 2, 3)), encoding="utf-8")
    assert oncebeat("import", "inv.csv", "--db", db_url, cwd=tmp_path).returncode == 0
    (tmp_path / "pay.csv").write_text(
        "invoice_number,paid_on\n"
        "INV-1,2026-02-01\n"          # line 2: fine
        "INV-404,2026-02-01\n"        # line 3: no such invoice
        "INV-2,2026-01-02\n"          # line 4: before INV-2 was issued
        "INV-3,2026-02-02\n"          # line 5: fine
        "=HYPERLINK(1),2026-02-01\n"  # line 6: unknown, and a formula for a spreadsheet
        "INV-1,2026-02-01\n",         # line 7: INV-1 twice: both lines refused
        encoding="utf-8")

    refused = oncebeat("import", "--payments", "pay.csv", "--db", db_url, cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "pay.csv: 5 problems on 5 lines of 6 rows; nothing was imported" in refused.stderr
    for where in ("pay.csv:2: column invoice_number: 'INV-1' is duplicated on line 7",
                  "pay.csv:3: column invoice_number: 'INV-404' is not a known invoice",
                  "pay.csv:4: column paid_on: '2026-01-02' is before the invoice was issued (2026-01-10)",
                  "pay.csv:6: column invoice_number: '=HYPERLINK(1)' is not a known invoice",
                  "pay.csv:7: column invoice_number: 'INV-1' is a duplicate of line 2"):
        assert where in refused.stderr
    assert set(_invoices_paid(db_url).values()) == {"open"}

    applied = oncebeat("import", "--payments", "pay.csv", "--skip-invalid", "rej.csv", "--errors-file", "err.txt",
                       "--db", db_url, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert "payments: 1, marked_paid: 1, unchanged (already closed): 0, rejected: 5" in applied.stdout
    assert "5 invalid row(s) written to rej.csv" in applied.stderr
    assert _invoices_paid(db_url) == {"INV-1": "open", "INV-2": "open", "INV-3": "paid"}
    errors = (tmp_path / "err.txt").read_text(encoding="utf-8").splitlines()
    assert [e.split(":")[1] for e in errors] == ["2", "3", "4", "6", "7"]
    with (tmp_path / "rej.csv").open(encoding="utf-8", newline="") as fh:
        rejects = list(csv.reader(fh))
    assert rejects[0] == ["invoice_number", "paid_on", "error"]
    assert rejects[2] == ["INV-404", "2026-02-01", "line 3: column invoice_number: 'INV-404' is not a known invoice; "
                                                   "import the invoices first, or fix the number"]
    assert rejects[4][:2] == ["'=HYPERLINK(1)", "2026-02-01"]  # formula-safe, as for invoices
    assert [r[2].split(":")[0] for r in rejects[1:]] == ["line 2", "line 3", "line 4", "line 6", "line 7"]


def test_a_streamed_import_checks_rows_far_apart_and_stays_all_or_nothing(tmp_path: Path, db_url: str) -> None:
    """Issue 21 item 9: rows are staged in pages (5,000): rules across rows still see the whole file."""
    n = 12_000
    rows = [f"S-{i},c{i % 300}@example.test,Customer {i % 300},EUR,{i % 900 + 1},2026-01-01,2026-01-31\n"
            for i in range(n)]
    rows[10_500] = "S-3,c7@example.test,Customer 7,EUR,5,2026-01-01,2026-01-31\n"  # line 10,502 repeats line 5's number
    rows[11_000] = "S-11000,c1@example.test,Someone Else,EUR,5,2026-01-01,2026-01-31\n"  # c1 is "Customer 1"
    (tmp_path / "big.csv").write_text(INVOICE_HEADER + "".join(rows), encoding="utf-8")

    refused = oncebeat("import", "big.csv", "--db", db_url, cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "big.csv: 3 problems on 3 lines of 12,000 rows; nothing was imported" in refused.stderr
    assert "big.csv:5: column invoice_number: 'S-3' is duplicated on line 10502" in refused.stderr
    assert "big.csv:10502: column invoice_number: 'S-3' is a duplicate of line 5" in refused.stderr
    assert "big.csv:11002: column customer_name: 'Someone Else' conflicts with 'Customer 1' on line 3" in refused.stderr
    with open_store(db_url) as store:
        assert store.read("count_invoices") == []

    applied = oncebeat("import", "big.csv", "--skip-invalid", "rej.csv", "--db", db_url, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert f"customers: 300, invoices: {n - 3}, new: {n - 3}, updated: 0, kept paid: 0, stale: 0, rejected: 3" in applied.stdout
    rejected = (tmp_path / "rej.csv").read_text(encoding="utf-8").splitlines()[1:]
    assert [r.split(",")[0] for r in rejected] == ["S-3", "S-3", "S-11000"]
    with open_store(db_url) as store:
        invoices = {r["number"]: r for r in store.read("list_invoices")}
    assert len(invoices) == n - 3 and "S-3" not in invoices and invoices["S-1"]["name"] == "Customer 1"


def test_memory_of_an_import_does_not_grow_with_the_file(tmp_path: Path, db_url: str) -> None:
    """Issue 21 item 9: a 20x larger file must not take 20x the memory (the bench measures 2M rows)."""
    peaks = {}
    for n in (2_000, 60_000):
        path = tmp_path / f"m{n}.csv"
        with path.open("w", encoding="utf-8") as fh:
            fh.write(INVOICE_HEADER)
            for i in range(n):
                fh.write(f"M{n}-{i},c{i}@example.test,Customer {i},USD,{i % 900 + 1}.50,2026-01-01,2026-01-31\n")
        env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        with (tmp_path / "stderr.txt").open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "import", str(path), "--db", db_url],
                                    cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
            proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0, (tmp_path / "stderr.txt").read_text()
        peaks[n] = usage.ru_maxrss * 1024
    # ~1.9 KB per row before: 58,000 more rows took ~110 MB more; a page of rows is all that is held now.
    assert peaks[60_000] - peaks[2_000] < 30 * 2**20, peaks
