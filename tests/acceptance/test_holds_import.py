"""Import columns hold_reason, promise_until, hold_note (issue 23 item 1): `oncebeat import` places the holds in the
import's transaction, once per row however often it is imported, and names every bad value with its line and
column. Real subprocesses, both backends."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import oncebeat

HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on,hold_reason,promise_until,hold_note\n"
GOOD = HEADER + """INV-1,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,promise,2099-02-10,called Monday
INV-2,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,dispute,,wrong amount
INV-3,bo@example.com,Bo,USD,10.00,2026-01-01,2099-01-31,,,
"""


def test_import_places_the_holds_its_rows_give_once(tmp_path: Path, db_url: str) -> None:
    (tmp_path / "invoices.csv").write_text(GOOD, encoding="utf-8")
    for _ in range(2):  # importing the same file again places no second hold
        result = oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    holds = json.loads(oncebeat("holds", "--db", db_url, "--json", cwd=tmp_path).stdout)
    assert [(h["invoice"], h["reason"], h["promise_until"], h["note"]) for h in holds] == [
        ("INV-1", "promise", "2099-02-10", "called Monday"), ("INV-2", "dispute", None, "wrong amount")]
    assert all(h["created_by"] == "import:invoices.csv" for h in holds)


def test_bad_hold_columns_are_named_with_line_and_column_and_nothing_is_imported(tmp_path: Path, db_url: str) -> None:
    bad = HEADER + """INV-1,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,vacation,,
INV-2,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,promise,,
INV-3,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,manual,2099-02-01,
INV-4,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,promise,2099-02-30,
INV-5,ana@example.com,Ana,USD,10.00,2026-01-01,2099-01-31,,,a note without a hold
"""
    (tmp_path / "invoices.csv").write_text(bad, encoding="utf-8")
    result = oncebeat("import", "invoices.csv", "--db", db_url, cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    err = result.stderr
    assert "invoices.csv:2: column hold_reason: 'vacation' is not a hold reason" in err
    assert "invoices.csv:3: column promise_until" in err and "hold_reason is promise" in err
    assert "invoices.csv:4: column promise_until: '2099-02-01' is set, but hold_reason is not promise" in err
    assert "invoices.csv:5: column promise_until: '2099-02-30'" in err
    assert "invoices.csv:6: column hold_note" in err
    assert "Traceback" not in err
    assert json.loads(oncebeat("holds", "--db", db_url, "--json", cwd=tmp_path).stdout) == []
