"""No CSV the project writes can run as a spreadsheet formula; a bad --skip-invalid path stops the import first."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oncebeat.csvsafe import FORMULA_STARTS, safe_cell
from oncebeat.reminders.importing import read_invoices_csv
from oncebeat.reminders.model import Customer, Invoice, Payment
from oncebeat.sample.book import write_invoices_csv, write_payments_csv
from oncebeat.store import open_store

ROOT = Path(__file__).resolve().parents[2]
HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on\n"
HOSTILE = ['=HYPERLINK("http://evil.example.test","click")', "+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0",
           "-2+3", "\t=1+1", "\r=1+1"]


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)


def _hostile_csv() -> str:
    rows = [f'INV-{n},c{n}@example.test,"{name.replace(chr(34), chr(34) * 2)}",USD,{name if n == 3 else "1.00"},'
            f"2026-01-01,2026-02-30\n" for n, name in enumerate(HOSTILE)]  # every row has a bad due_on
    return HEADER + "".join(rows) + "INV-9,ok@example.test,Ok,USD,5.00,2026-01-01,2026-01-31\n"


def assert_no_formula(path: Path) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), f"formula cell {cell!r} in {path}"
    return rows


def test_rejected_rows_with_formulas_are_written_escaped(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "invoices.csv").write_text(_hostile_csv(), encoding="utf-8", newline="")
    result = oncebeat("import", "invoices.csv", "--db", db_url, "--skip-invalid", "rejects.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = assert_no_formula(tmp_path / "rejects.csv")
    names = [row[2] for row in rows[1:]]
    assert names == ["'" + name for name in HOSTILE]
    assert rows[4][4] == "'-2+3"  # the amount column of the row whose amount was a formula


@pytest.mark.parametrize("target", ["invoices.csv", "./sub/../invoices.csv", "missing-folder/rejects.csv",
                                    "invoices.csv/rejects.csv"])
def test_a_rejects_path_that_is_the_input_or_unwritable_is_refused_before_anything_is_imported(
        tmp_path: Path, db_url: str, target: str) -> None:
    (tmp_path / "sub").mkdir()
    original = _hostile_csv().encode("utf-8")
    (tmp_path / "invoices.csv").write_bytes(original)
    result = oncebeat("import", "invoices.csv", "--db", db_url, "--skip-invalid", target, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"error: --skip-invalid {Path(target)}: " in result.stderr and "Nothing was imported" in result.stderr
    assert (tmp_path / "invoices.csv").read_bytes() == original
    with open_store(db_url) as store:  # refused before the database was even opened
        assert store.applied_migrations() == []


def test_the_generated_book_and_payment_files_escape_formulas_too(tmp_path: Path) -> None:
    from datetime import date

    from oncebeat.sample.book import Book

    customer = Customer(email="eve@example.test", name="=HYPERLINK(\"http://evil.example.test\")")
    invoice = Invoice(number="@SUM(1)", customer_email=customer.email, currency="USD", amount_due=100,
                      issued_on=date(2026, 1, 1), due_on=date(2026, 1, 31))
    write_invoices_csv(Book(customers=[customer], invoices=[invoice], payments=[]), tmp_path / "book.csv")
    write_payments_csv([Payment(number="-1+1", paid_on=date(2026, 2, 1))], tmp_path / "payments.csv")
    assert assert_no_formula(tmp_path / "book.csv")[1][:3] == ["'@SUM(1)", "eve@example.test",
                                                               "'=HYPERLINK(\"http://evil.example.test\")"]
    assert assert_no_formula(tmp_path / "payments.csv")[1] == ["'-1+1", "2026-02-01"]
    data = read_invoices_csv(tmp_path / "book.csv")
    assert [i.number for i in data.invoices] == ["'@SUM(1)"]  # read back as text, never as a formula


@pytest.mark.parametrize(("value", "shown"), [("=1+1", "'=1+1"), ("+1", "'+1"), ("-1", "'-1"), ("@a", "'@a"),
                                              ("\tx", "'\tx"), ("\rx", "'\rx"), ("a=1", "a=1"), ("", ""),
                                              ("'=1", "'=1")])
def test_cells_are_escaped_by_the_owasp_rule(value: str, shown: str) -> None:
    assert safe_cell(value) == shown
