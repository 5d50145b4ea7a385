"""Imports people actually have (date formats, defaults, computed columns) and values that mean nothing."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oncebeat.errors import ConfigError, StoreError
from oncebeat.reminders.conversions import DATE_MAX, DATE_MIN, DateFormat, currency_reason, zone_reason
from oncebeat.reminders.importing import parse_column_map, read_invoices_csv, read_payments_csv
from oncebeat.reminders.policy import policy_from_dict
from oncebeat.store import open_store

HEADER = "invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on"


def write(tmp_path: Path, text: str, name: str = "invoices.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def reasons(tmp_path: Path, row: str, **kwargs: object) -> list[str]:
    result = read_invoices_csv(write(tmp_path, HEADER + "\n" + row + "\n"), **kwargs)  # type: ignore[arg-type]
    return [str(p) for p in result.problems]


# --- date formats ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "text", "expected"), [
    ("mdy", "1/2/2013", date(2013, 1, 2)),
    ("dmy", "1/2/2013", date(2013, 2, 1)),
    ("dmy", "31.12.2013", date(2013, 12, 31)),
    ("%m/%d/%Y", "12/31/2013", date(2013, 12, 31)),
    ("%Y-%m-%d %H:%M:%S", "2010-12-01 08:26:00", date(2010, 12, 1)),
    ("iso", "2026-01-31", date(2026, 1, 31)),
])
def test_date_formats_read_us_european_iso_and_strftime_dates(spec: str, text: str, expected: date) -> None:
    assert DateFormat.parse(spec).read(text) == expected


def test_a_date_in_another_format_or_impossible_is_refused_with_the_expected_shape() -> None:
    mdy = DateFormat.parse("mdy")
    assert mdy.read("2013-01-02") is None and mdy.read("2/30/2013") is None
    assert "MM/DD/YYYY" in mdy.reason


@pytest.mark.parametrize("spec", ["%m/%Y", "%d.%m", "monthly"])
def test_a_date_format_without_day_month_or_year_is_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="--date-format"):
        DateFormat.parse(spec)


def test_a_raw_export_with_us_dates_no_currency_and_customer_ids_imports_with_options(tmp_path: Path) -> None:
    path = write(tmp_path, "InvoiceId,CustomerId,InvoiceDate,Total\n1,2,1/2/2013,1.98\n2,2,1/15/2013,3.96\n")
    mapping = parse_column_map(["invoice_number=template:AR-{InvoiceId},amount_due=Total,issued_on=InvoiceDate",
                                "customer_email=template:{CustomerId}@billing.example.test",
                                "customer_name=template:Customer {CustomerId}, account {CustomerId}"])
    result = read_invoices_csv(path, column_map=mapping, date_format=DateFormat.parse("%m/%d/%Y"),
                               default_currency="USD", due_days=30)
    assert result.problems == []
    first = result.invoices[0]
    assert (first.number, first.customer_email, first.currency, first.amount_due) == (
        "AR-1", "2@billing.example.test", "USD", 198)
    assert (first.issued_on, first.due_on) == (date(2013, 1, 2), date(2013, 2, 1))
    assert result.customers[0].name == "Customer 2, account 2"


def test_a_template_field_that_is_empty_rejects_the_row_naming_the_column(tmp_path: Path) -> None:
    path = write(tmp_path, "InvoiceNo,CustomerID,InvoiceDate,Total\nA1,,2026-01-01,5\n")
    mapping = parse_column_map("invoice_number=InvoiceNo,amount_due=Total,issued_on=InvoiceDate,"
                               "customer_email=template:c-{CustomerID}@billing.example.test,customer_name=const:Someone")
    result = read_invoices_csv(path, column_map=mapping, default_currency="GBP", due_days=30)
    assert [str(p) for p in result.problems] == [
        "invoices.csv:2: column customer_email: is computed from CustomerID, which is empty on this line"]


def test_a_template_naming_a_column_the_header_lacks_is_a_header_problem(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA,a@example.test,A,USD,1,2026-01-01,2026-01-02\n")
    result = read_invoices_csv(path, column_map=parse_column_map("customer_name=template:{Nmae}"))
    assert result.invoices == [] and "uses Nmae, which the header does not have" in str(result.problems[0])


def test_a_malformed_template_is_refused_when_the_map_is_read() -> None:
    with pytest.raises(ConfigError, match="customer_email=template:"):
        parse_column_map("customer_email=template:{CustomerID@x.test")


def test_rows_with_a_currency_keep_it_and_rows_without_get_the_default(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + "\nA,a@example.test,A,EUR,1,2026-01-01,2026-01-02\n"
                                    "B,b@example.test,B,,1,2026-01-01,2026-01-02\n")
    result = read_invoices_csv(path, default_currency="usd")
    assert [i.currency for i in result.invoices] == ["EUR", "USD"]


def test_a_default_currency_that_is_not_tender_is_refused() -> None:
    with pytest.raises(ConfigError, match="--currency: 'XTS'"):
        read_invoices_csv(Path("unused.csv"), default_currency="XTS")


# --- values that mean nothing ----------------------------------------------------------------------


@pytest.mark.parametrize(("amount", "words"), [
    ("0", "is zero"), ("0.00", "is zero"), ("-5", "is negative"),
    ("1.0000000000000000000000000000000000000001", "more decimals than USD allows (2)"),
    ("١٠", "digits of another script"),
])
def test_amounts_that_mean_nothing_are_refused_naming_amount_due(tmp_path: Path, amount: str, words: str) -> None:
    (problem,) = reasons(tmp_path, f"A,a@example.test,A,USD,{amount},2026-01-01,2026-01-31")
    assert "column amount_due" in problem and words in problem


@pytest.mark.parametrize(("code", "words"), [
    ("XXX", "not legal tender"), ("XAU", "not legal tender"), ("XTS", "not legal tender"),
    ("DEM", "was withdrawn"), ("ZZZ", "not an ISO 4217"),
])
def test_non_tender_and_withdrawn_currencies_are_refused(tmp_path: Path, code: str, words: str) -> None:
    problems = reasons(tmp_path, f"A,a@example.test,A,{code},10,2026-01-01,2026-01-31")
    assert any("column currency" in p and words in p for p in problems), problems
    assert currency_reason("EUR") is None and currency_reason("JPY") is None


def test_a_nul_byte_is_refused_with_its_line_column_and_position(tmp_path: Path) -> None:
    (problem,) = reasons(tmp_path, "A,a@example.test,Ann\x00ie,USD,10,2026-01-01,2026-01-31")
    assert problem.startswith("invoices.csv:2: column customer_name: contains a NUL byte at character 4")


def test_digits_of_another_script_in_a_date_are_refused(tmp_path: Path) -> None:
    (problem,) = reasons(tmp_path, "A,a@example.test,A,USD,10,٢٠٢٦-01-01,2026-01-31")
    assert "column issued_on" in problem and "digits of another script" in problem


@pytest.mark.parametrize("placeholder", ["9999-12-31", "0001-01-01"])
def test_placeholder_dates_outside_the_documented_range_are_refused(tmp_path: Path, placeholder: str) -> None:
    problems = reasons(tmp_path, f"A,a@example.test,A,USD,10,2026-01-01,{placeholder}")
    assert any("column due_on" in p and "outside the supported range 1970-01-01 to 2099-12-31" in p
               for p in problems), problems
    assert (DATE_MIN, DATE_MAX) == (date(1970, 1, 1), date(2099, 12, 31))


def test_paid_on_before_the_issue_date_or_in_the_future_is_refused(tmp_path: Path) -> None:
    row = "A,a@example.test,A,USD,10,2026-01-10,2026-01-31,paid,{}"
    head = HEADER + ",status,paid_on\n"
    early = read_invoices_csv(write(tmp_path, head + row.format("2026-01-09") + "\n"))
    assert "column paid_on: '2026-01-09' is before the invoice was issued" in str(early.problems[0])
    late = read_invoices_csv(write(tmp_path, head + row.format("2030-01-01") + "\n"), today=date(2026, 2, 1))
    assert "column paid_on: '2030-01-01' is in the future" in str(late.problems[0])


def test_payments_in_the_future_and_bad_paid_at_instants_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "invoice_number,paid_on,paid_at\nA,2030-01-01,\nB,2026-01-05,2026-01-05T10:00\n"
                           "C,01/05/2026,2026-01-05T10:00:00-06:00\n", "payments.csv")
    payments, problems = read_payments_csv(path, today=date(2026, 2, 1))
    text = [str(p) for p in problems]
    assert any("payments.csv:2: column paid_on" in t and "in the future" in t for t in text)
    assert any("payments.csv:3: column paid_at" in t and "no UTC offset" in t for t in text)
    assert any("payments.csv:4: column paid_on" in t for t in text) and payments == []
    us, _us_problems = read_payments_csv(path, date_format=DateFormat.parse("mdy"))
    assert [p.number for p in us] == ["C"] and us[0].paid_at is not None


@pytest.mark.parametrize("zone", ["localtime", "posixrules", "posix/Europe/Paris"])
def test_host_dependent_zone_names_are_refused_for_customers_and_the_policy(tmp_path: Path, zone: str) -> None:
    path = write(tmp_path, HEADER + ",customer_tz\nA,a@example.test,A,USD,10,2026-01-01,2026-01-31," + zone + "\n")
    assert "column customer_tz" in str(read_invoices_csv(path).problems[0])
    assert zone_reason(zone) is not None
    with pytest.raises(ConfigError, match="tz"):
        policy_from_dict({"schedule": {"tz": zone}})


def test_a_catchup_window_beyond_a_month_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="catchup_window"):
        policy_from_dict({"schedule": {"catchup_window": 1e308}})
    assert policy_from_dict({"schedule": {"catchup_window": "31d"}}).catchup_window == 31 * 86400


def test_bad_pool_size_and_busy_timeout_in_the_database_url_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="busy_timeout must be seconds"):
        open_store(f"sqlite:///{tmp_path}/x.db?busy_timeout=abc")
    with pytest.raises(StoreError, match="pool_size must be a whole number") as info:
        open_store("postgresql://postgres:S3cret@127.0.0.1:5432/test?pool_size=abc")
    assert "S3cret" not in str(info.value)


def test_an_internal_error_in_doctor_or_check_exits_2_never_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from oncebeat import cli, doctor

    def crash(*args: object, **kwargs: object) -> None:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(doctor, "run_doctor", crash)
    db = f"sqlite:///{tmp_path}/x.db"
    with open_store(db) as store:
        store.migrate()
    monkeypatch.setattr(sys, "argv", ["oncebeat", "doctor", "--db", db])
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2


# --- invisible format characters and length limits (issue 21, item 10) ----------------------------------


@pytest.mark.parametrize(("column", "row", "shown"), [
    ("customer_name", "INV-1,zoe@example.com,Zoë \u202egnp.exe,USD,5,2026-01-01,2026-01-31",
     "a bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE) at character 5"),
    ("customer_name", "INV-1,zoe@example.com,\u2067Zoë\u2069,USD,5,2026-01-01,2026-01-31",
     "a bidirectional control (U+2067 RIGHT-TO-LEFT ISOLATE) at character 1"),
    ("invoice_number", "INV-\u200b1,zoe@example.com,Zoë,USD,5,2026-01-01,2026-01-31",
     "an invisible format character (U+200B ZERO WIDTH SPACE) at character 5"),
    ("invoice_number", "INV-\u200d1,zoe@example.com,Zoë,USD,5,2026-01-01,2026-01-31",
     "an invisible format character (U+200D ZERO WIDTH JOINER) at character 5"),
    ("currency", "INV-1,zoe@example.com,Zoë,US\u200eD,5,2026-01-01,2026-01-31",
     "a bidirectional control (U+200E LEFT-TO-RIGHT MARK) at character 3"),
])
def test_bidi_controls_and_format_characters_are_refused_naming_line_column_and_character(
        tmp_path: Path, column: str, row: str, shown: str) -> None:
    (problem,) = reasons(tmp_path, row)
    assert problem.startswith(f"invoices.csv:2: column {column}: contains {shown}"), problem
    assert "\u202e" not in problem and "\u200b" not in problem  # the message never carries the character itself


def test_joiners_of_ordinary_writing_are_kept_in_names(tmp_path: Path) -> None:
    rows = ("INV-1,a@example.com,Mohammad\u200cReza,USD,5,2026-01-01,2026-01-31\n"
            "INV-2,b@example.com,Family \U0001f468\u200d\U0001f469,USD,5,2026-01-01,2026-01-31\n")
    result = read_invoices_csv(write(tmp_path, HEADER + "\n" + rows))
    assert result.problems == []
    assert [c.name for c in result.customers] == ["Mohammad\u200cReza", "Family \U0001f468\u200d\U0001f469"]


@pytest.mark.parametrize(("column", "value", "limit"), [
    ("invoice_number", "A" * 100_000, 64),
    ("customer_name", "N" * 201, 200),
    ("customer_email", "a" * 60 + "@" + ".".join(["d" * 60] * 4) + ".test", 254),
])
def test_a_value_over_its_limit_is_refused_by_length_without_being_repeated(
        tmp_path: Path, column: str, value: str, limit: int) -> None:
    fields = {"invoice_number": "INV-1", "customer_email": "zoe@example.com", "customer_name": "Zoë"} | {column: value}
    row = f"{fields['invoice_number']},{fields['customer_email']},{fields['customer_name']},USD,5,2026-01-01,2026-01-31"
    (problem,) = reasons(tmp_path, row)
    assert problem.startswith(f"invoices.csv:2: column {column}: is {len(value):,} characters long")
    assert f"at most {limit} are allowed" in problem and len(problem) < 300


def test_values_at_their_limits_are_accepted(tmp_path: Path) -> None:
    row = f"{'N' * 64},zoe@example.com,{'Z' * 200},USD,5,2026-01-01,2026-01-31"
    assert reasons(tmp_path, row) == []


def test_payments_refuse_format_characters_and_overlong_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, f"invoice_number,paid_on\nINV-\u202e1,2026-01-05\n{'P' * 65},2026-01-05\n", "pay.csv")
    payments, problems = read_payments_csv(path)
    assert payments == []
    assert [str(p)[:44] for p in problems] == ["pay.csv:2: column invoice_number: contains a",
                                               "pay.csv:3: column invoice_number: is 65 char"]
