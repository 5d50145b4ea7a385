"""CSV import of invoices and payments: every problem reported with its line and column."""

from __future__ import annotations

import csv
from datetime import date
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError, ImportRejected
from oncebeat.reminders.importing import (
    INVOICE_CSV_HELP,
    STANDARD_COLUMNS,
    InvoiceImport,
    RowProblem,
    parse_column_map,
    read_invoices_csv,
    read_payments_csv,
    write_rejects,
)
from oncebeat.reminders.model import Customer, Invoice, Payment

HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on"


def write(tmp_path: Path, text: str, name: str = "invoices.csv", *, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def problems_by_line(result: InvoiceImport) -> dict[int, list[RowProblem]]:
    out: dict[int, list[RowProblem]] = {}
    for p in result.problems:
        out.setdefault(p.line, []).append(p)
    return out


def test_a_good_file_parses_into_customers_and_invoices(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on,"
        "customer_locale,customer_tz,status,paid_on\n"
        "INV-2026-00001,Zoe@Example.com,Zoë Martin,USD,1234.50,2026-01-05,2026-02-04,en_US,America/Chicago,,\n"
        "INV-2026-00002,zoe@example.com,Zoë Martin,USD,99,2026-01-06,2026-02-05,,,paid,2026-02-01\n"
        "INV-2026-00003,jurgen@example.org,Jürgen Weiß,EUR,10.00,2026-01-07,2026-01-22,de-DE,Europe/Berlin,void,\n"
        "INV-2026-00004,taro@example.net,山田 太郎,jpy,120000,2026-01-08,2026-02-22,ja_JP,Asia/Tokyo,,2026-02-20\n",
    )
    result = read_invoices_csv(path)
    assert result.problems == []
    assert result.rows_read == 4
    assert result.rejected_lines == []
    assert result.customers == [
        Customer(email="zoe@example.com", name="Zoë Martin", locale="en_US", tz="America/Chicago"),
        Customer(email="jurgen@example.org", name="Jürgen Weiß", locale="de_DE", tz="Europe/Berlin"),
        Customer(email="taro@example.net", name="山田 太郎", locale="ja_JP", tz="Asia/Tokyo"),
    ]
    assert result.invoices[0] == Invoice(
        number="INV-2026-00001",
        customer_email="zoe@example.com",
        currency="USD",
        amount_due=123450,
        issued_on=date(2026, 1, 5),
        due_on=date(2026, 2, 4),
    )
    assert (result.invoices[1].status, result.invoices[1].paid_on) == ("paid", date(2026, 2, 1))
    assert result.invoices[2].status == "void"
    # paid_on with no status means paid; currency codes are upper-cased
    assert (result.invoices[3].status, result.invoices[3].currency, result.invoices[3].amount_due) == ("paid", "JPY", 120000)


def test_absent_optional_columns_carry_no_locale_or_zone_and_the_invoice_is_open(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA-1,a@example.com,A,USD,5,2026-01-01,2026-01-31\n")
    result = read_invoices_csv(path)
    assert result.problems == []
    # None: not carried, so a known customer keeps its own and a new one gets en_US and no zone (records.py).
    assert result.customers == [Customer(email="a@example.com", name="A", locale=None, tz=None)]
    assert (result.invoices[0].status, result.invoices[0].paid_on) == ("open", None)


def test_bad_date_unknown_currency_duplicate_number_and_missing_email_are_all_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "\n"
        "INV-1,ok@example.com,Ok,USD,10.00,2026-01-01,2026-01-31\n"  # line 2: duplicated by line 5
        "INV-2,ok@example.com,Ok,USD,10.00,2026-01-01,2026-02-30\n"  # line 3: bad date
        "INV-3,ok@example.com,Ok,XYZ,10.00,2026-01-01,2026-01-31\n"  # line 4: unknown currency
        "INV-1,ok@example.com,Ok,USD,10.00,2026-01-01,2026-01-31\n"  # line 5: duplicate number
        "INV-4,,Nobody,USD,10.00,2026-01-01,2026-01-31\n"  # line 6: missing email
        "INV-5,good@example.com,Good,EUR,10.00,2026-01-01,2026-01-31\n",  # line 7: fine
    )
    result = read_invoices_csv(path)
    found = {(p.line, p.column) for p in result.problems}
    assert {(3, "due_on"), (4, "currency"), (5, "invoice_number"), (2, "invoice_number"), (6, "customer_email")} <= found
    assert len(result.problems) >= 4
    assert [inv.number for inv in result.invoices] == ["INV-5"]
    assert [line for line, _ in result.rejected_lines] == [2, 3, 4, 5, 6]
    assert result.customers == [Customer(email="good@example.com", name="Good")]
    messages = {p.line: str(p) for p in result.problems}
    assert messages[3] == "invoices.csv:3: column due_on: '2026-02-30' is not a valid date (use YYYY-MM-DD)"
    assert "duplicate of line 2" in messages[5]
    assert "line 5" in messages[2]
    assert "ISO 4217" in messages[4]


def test_every_problem_in_one_row_is_reported_not_just_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + ",status,customer_tz,customer_locale\n"
        "X-1,not an email,N,USD,-3,01/02/2026,2026-01-31,closed,America/Chicgo,xx_YY\n",
    )
    result = read_invoices_csv(path)
    columns = [p.column for p in result.problems]
    assert set(columns) == {"customer_email", "amount_due", "issued_on", "status", "customer_tz", "customer_locale"}
    assert all(p.line == 2 for p in result.problems)
    zone = next(p for p in result.problems if p.column == "customer_tz")
    assert "America/Chicago" in zone.reason
    assert result.invoices == [] and result.customers == []


def test_due_before_issue_is_a_problem_on_due_on(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA-1,a@example.com,A,USD,5,2026-02-01,2026-01-31\n")
    (problem,) = read_invoices_csv(path).problems
    assert (problem.line, problem.column, problem.value) == (2, "due_on", "2026-01-31")
    assert "before issued_on 2026-02-01" in problem.reason


@pytest.mark.parametrize(
    ("currency", "amount", "minor"),
    [("USD", "1234.50", 123450), ("USD", "7", 700), ("JPY", "1200", 1200), ("BHD", "12.345", 12345), ("EUR", "0.5", 50)],
)
def test_amounts_are_converted_to_minor_units_of_the_currency(tmp_path: Path, currency: str, amount: str, minor: int) -> None:
    path = write(tmp_path, HEADER + f"\nA-1,a@example.com,A,{currency},{amount},2026-01-01,2026-01-31\n")
    result = read_invoices_csv(path)
    assert result.problems == []
    assert result.invoices[0].amount_due == minor


@pytest.mark.parametrize(
    ("currency", "amount", "words"),
    [
        ("JPY", "1200.5", "no minor unit"),
        ("USD", "10.999", "more decimals than USD allows (2)"),
        ("BHD", "1.2345", "more decimals than BHD allows (3)"),
        ("USD", "-5.00", "negative"),
        ("USD", "abc", "not a number"),
        ("USD", '"1,234.50"', "not a number"),
        ("USD", "$12", "not a number"),
    ],
)
def test_amounts_with_too_many_decimals_or_not_numbers_are_refused(tmp_path: Path, currency: str, amount: str, words: str) -> None:
    path = write(tmp_path, HEADER + f"\nA-1,a@example.com,A,{currency},{amount},2026-01-01,2026-01-31\n")
    (problem,) = read_invoices_csv(path).problems
    assert (problem.line, problem.column) == (2, "amount_due")
    assert words in problem.reason


@pytest.mark.parametrize("email", ["bob", "bob@localhost", "a@b@example.com", "bob smith@example.com", "Bob <bob@example.com>"])
def test_bad_email_addresses_are_refused(tmp_path: Path, email: str) -> None:
    path = write(tmp_path, HEADER + f'\nA-1,"{email}",A,USD,5,2026-01-01,2026-01-31\n')
    (problem,) = read_invoices_csv(path).problems
    assert (problem.line, problem.column, problem.value) == (2, "customer_email", email)


def test_the_same_email_with_another_name_is_a_conflict_and_emails_ignore_case(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "\n"
        "A-1,Robert@Example.com,Robert Smith,USD,5,2026-01-01,2026-01-31\n"
        "A-2,robert@example.com,Robert Smith,USD,6,2026-01-01,2026-01-31\n"
        "A-3,ROBERT@example.com,Bob Smith,USD,7,2026-01-01,2026-01-31\n",
    )
    result = read_invoices_csv(path)
    (problem,) = result.problems
    assert (problem.line, problem.column, problem.value) == (4, "customer_name", "Bob Smith")
    assert "line 2" in problem.reason
    assert result.customers == [Customer(email="robert@example.com", name="Robert Smith")]
    assert [i.number for i in result.invoices] == ["A-1", "A-2"]


def test_status_paid_needs_paid_on_and_open_refuses_it(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + ",status,paid_on\n"
        "A-1,a@example.com,A,USD,5,2026-01-01,2026-01-31,paid,\n"
        "A-2,a@example.com,A,USD,5,2026-01-01,2026-01-31,open,2026-01-15\n"
        "A-3,a@example.com,A,USD,5,2026-01-01,2026-01-31,PAID,2026-01-15\n",
    )
    result = read_invoices_csv(path)
    assert [(p.line, p.column) for p in result.problems] == [(2, "paid_on"), (3, "paid_on")]
    assert [(i.number, i.status) for i in result.invoices] == [("A-3", "paid")]


def test_a_missing_required_column_is_one_problem_on_line_1_suggesting_map(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,DueDate\n"
        "A-1,a@example.com,A,USD,5,2026-01-01,2026-01-31\n"
        "A-2,a@example.com,A,USD,5,2026-01-01,2026-01-31\n",
    )
    result = read_invoices_csv(path)
    (problem,) = result.problems
    assert (problem.line, problem.column) == (1, "due_on")
    assert "DueDate" in problem.reason and "--map" in problem.reason
    assert result.invoices == []
    assert result.rows_read == 2
    assert [line for line, _ in result.rejected_lines] == [2, 3]


def test_map_renames_their_columns_to_ours(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "InvoiceNo,Email,Client,Cur,Total,Date,Due Date,Notes\n"
        "A-1,a@example.com,Ana,BRL,150.00,2026-01-01,2026-01-31,hello\n",
    )
    mapping = parse_column_map(
        "invoice_number=InvoiceNo, customer_email=Email,customer_name=Client,currency=Cur,"
        "amount_due=Total,issued_on=Date,due_on=Due Date"
    )
    assert mapping["due_on"] == "Due Date"
    result = read_invoices_csv(path, column_map=mapping)
    assert result.problems == []
    assert result.invoices[0].amount_due == 15000
    assert result.customers[0].name == "Ana"


@pytest.mark.parametrize(
    ("spec", "named"),
    [("invoice_number", "'invoice_number'"), ("invoce_number=X", "invoce_number"), ("due_on=", "due_on="), ("due_on=A,due_on=B", "due_on")],
)
def test_a_bad_map_spec_is_a_config_error_naming_the_bad_part(spec: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_column_map(spec)
    assert named in str(caught.value)


def test_an_empty_map_spec_means_no_renaming() -> None:
    assert parse_column_map(None) == {}
    assert parse_column_map("  ") == {}


def test_a_utf8_bom_and_crlf_line_ends_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufeff" + HEADER + "\r\nA-1,jose@example.com,José Núñez,USD,5,2026-01-01,2026-01-31\r\n")
    result = read_invoices_csv(path)
    assert result.problems == []
    assert result.customers[0].name == "José Núñez"


def test_semicolon_separated_files_from_spreadsheets_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER.replace(",", ";") + "\nA-1;a@example.com;A;EUR;5.10;2026-01-01;2026-01-31\n")
    result = read_invoices_csv(path)
    assert result.problems == []
    assert result.invoices[0].amount_due == 510


def test_non_utf8_bytes_are_reported_on_their_line_and_column(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "\nA-1,a@example.com,Ann,USD,5,2026-01-01,2026-01-31\nA-2,jose@example.com,José,USD,5,2026-01-01,2026-01-31\n",
        encoding="latin-1",
    )
    result = read_invoices_csv(path)
    (problem,) = result.problems
    assert (problem.line, problem.column) == (3, "customer_name")
    assert "UTF-8" in problem.reason
    assert [i.number for i in result.invoices] == ["A-1"]


def test_an_empty_file_is_a_problem(tmp_path: Path) -> None:
    result = read_invoices_csv(write(tmp_path, ""))
    (problem,) = result.problems
    assert problem.line == 1 and "empty" in problem.reason
    assert result.invoices == [] and result.rows_read == 0


def test_rows_with_the_wrong_number_of_fields_are_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "\n"
        "A-1,a@example.com,A,USD,1,234.50,2026-01-01,2026-01-31\n"  # unquoted comma
        "A-2,a@example.com,A,USD,5,2026-01-01\n"  # short
        "A-3,a@example.com,A,USD,5,2026-01-01,2026-01-31,,,\n",  # trailing empty fields are fine
    )
    result = read_invoices_csv(path)
    assert [(p.line, p.column) for p in result.problems] == [(2, None), (3, None)]
    assert "8 fields" in result.problems[0].reason
    assert [i.number for i in result.invoices] == ["A-3"]


def test_line_numbers_are_physical_lines_even_with_quoted_newlines_and_blank_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        HEADER + "\n"
        'A-1,a@example.com,"Ann\nSecond line",USD,5,2026-01-01,2026-01-31\n'  # lines 2-3
        "\n"  # line 4
        "A-2,a@example.com,Ann,USD,5,2026-01-01,2026-13-01\n",  # line 5
    )
    result = read_invoices_csv(path)
    assert [(p.line, p.column) for p in result.problems if p.column == "due_on"] == [(5, "due_on")]
    assert result.rows_read == 2


def test_source_name_is_used_in_messages(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA-1,a@example.com,A,USD,5,2026-01-01,bad\n")
    result = read_invoices_csv(path, source_name="upload.csv")
    assert str(result.problems[0]).startswith("upload.csv:2: column due_on: 'bad' is not a valid date")


def test_raise_if_problems_raises_import_rejected_listing_every_problem(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA-1,a@example.com,A,USD,5,2026-01-01,bad\nA-2,,A,USD,5,2026-01-01,2026-01-31\n")
    result = read_invoices_csv(path)
    with pytest.raises(ImportRejected) as caught:
        result.raise_if_problems()
    assert len(caught.value.problems) == 2
    assert caught.value.problems[0].startswith("invoices.csv:2:")
    assert "nothing was imported" in str(caught.value)
    read_invoices_csv(write(tmp_path, HEADER + "\nA-1,a@example.com,A,USD,5,2026-01-01,2026-01-31\n", "ok.csv")).raise_if_problems()


def test_write_rejects_keeps_the_original_columns_and_adds_an_error_column(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "InvoiceNo,customer_email,customer_name,currency,amount_due,issued_on,due_on,Memo\n"
        "A-1,a@example.com,Zoë,USD,5,2026-01-01,2026-02-30,keep me\n"
        "A-2,a@example.com,Zoë,USD,5,2026-01-01,2026-01-31,fine\n"
        "A-3,,Zoë,XYZ,5,2026-01-01,2026-01-31,\n",
    )
    result = read_invoices_csv(path, column_map={"invoice_number": "InvoiceNo"})
    out = tmp_path / "rejects.csv"
    assert write_rejects(out, result.header, result.rejected_lines, result.problems) == 2
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["InvoiceNo", "customer_email", "customer_name", "currency", "amount_due", "issued_on", "due_on", "Memo", "error"]
    assert rows[1][:8] == ["A-1", "a@example.com", "Zoë", "USD", "5", "2026-01-01", "2026-02-30", "keep me"]
    assert rows[1][8] == "line 2: column due_on: '2026-02-30' is not a valid date (use YYYY-MM-DD)"
    assert rows[2][0] == "A-3"
    assert "customer_email" in rows[2][8] and "currency" in rows[2][8] and rows[2][8].startswith("line 4: ")


def test_fixed_rejects_can_be_imported_again(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA-1,a@example.com,A,USD,5,2026-01-01,2026-02-30\n")
    result = read_invoices_csv(path)
    out = tmp_path / "rejects.csv"
    write_rejects(out, result.header, result.rejected_lines, result.problems)
    out.write_text(out.read_text(encoding="utf-8").replace("2026-02-30", "2026-02-28"), encoding="utf-8")
    again = read_invoices_csv(out)
    assert again.problems == []
    assert again.invoices[0].due_on == date(2026, 2, 28)


def test_payments_csv_gives_payments_and_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufeffinvoice_number,paid_on\nINV-1,2026-02-01\nINV-2,2026/02/01\nINV-3,\nINV-1,2026-02-03\nINV-4,2026-02-04\n",
        "payments.csv",
    )
    payments, problems = read_payments_csv(path)
    assert payments == [Payment(number="INV-4", paid_on=date(2026, 2, 4))]
    assert [(p.line, p.column) for p in problems] == [(2, "invoice_number"), (3, "paid_on"), (4, "paid_on"), (5, "invoice_number")]
    assert "duplicate of line 2" in problems[-1].reason
    assert str(problems[1]) == "payments.csv:3: column paid_on: '2026/02/01' is not a valid date (use YYYY-MM-DD)"


def test_payments_csv_honours_the_column_map(tmp_path: Path) -> None:
    path = write(tmp_path, "Number,Date\nINV-9,2026-03-01\n", "payments.csv")
    payments, problems = read_payments_csv(path, column_map=parse_column_map("invoice_number=Number,paid_on=Date"))
    assert problems == []
    assert payments == [Payment(number="INV-9", paid_on=date(2026, 3, 1))]
    _, problems = read_payments_csv(path)
    assert [(p.line, "--map" in p.reason) for p in problems] == [(1, True)]


def test_the_help_text_documents_every_standard_column() -> None:
    for column in STANDARD_COLUMNS:
        assert column in INVOICE_CSV_HELP
