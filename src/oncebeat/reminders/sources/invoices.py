"""Invoice rows of a CSV file: the per-row checks, the rules across rows, and the in-memory reader.

A row is checked on its own by :class:`InvoiceRowChecker` (required values, formats, ranges, status
agreement), giving a :class:`StagedInvoice` and its problems. Two rules need the whole file; each reads a
sorted stream, so it runs the same on a Python list (:func:`read_invoices_csv`, small files) and on a
database staging table paged in order (:mod:`oncebeat.reminders.bulk`, any size, bounded memory):

- :func:`duplicate_problems`: an invoice number given twice is reported on both lines;
- :func:`customer_rule`: one customer per email, whose rows agree on the name (case-insensitively) and on
  the locale and zone they give explicitly; it also yields the customers of the accepted rows.

The file format is described in :data:`INVOICE_CSV_HELP`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ..conversions import DATE_RANGE_TEXT, Computed, DateFormat, currency_reason, date_range_reason
from ..model import DEFAULT_LOCALE, DEFAULT_TZ, HOLD_REASONS, INVOICE_STATUSES, Customer, Invoice
from ..notices.attachments import pdf_path_reason
from ..segments import check_country, check_tags
from .problems import RowProblem
from .table import CsvTable, Progress, computed_columns, fit_fields, resolve_columns, row_dict, row_values
from .values import (
    amount_minor,
    check_locale,
    check_payment_url,
    check_zone,
    email_reason,
    paid_on_reason,
    read_date,
    status_on_reason,
)

__all__ = ["DEFAULT_LOCALE", "DEFAULT_TZ", "HOLD_COLUMNS", "INVOICE_CSV_HELP", "OPTIONAL_COLUMNS", "REQUIRED_COLUMNS",
           "STANDARD_COLUMNS", "CustomerRow", "InvoiceImport", "InvoiceRowChecker", "StagedInvoice",
           "customer_rule", "duplicate_problems", "read_invoices_csv"]

REQUIRED_COLUMNS: tuple[str, ...] = (
    "invoice_number",
    "customer_email",
    "customer_name",
    "currency",
    "amount_due",
    "issued_on",
    "due_on",
)
OPTIONAL_COLUMNS: tuple[str, ...] = ("customer_locale", "customer_tz", "status", "paid_on", "status_on", "payment_url",
                                   "pdf_path", "customer_country", "customer_tags")
#: Optional columns that place a hold on the invoice (``oncebeat import``'s streamed CSV import applies them).
HOLD_COLUMNS: tuple[str, ...] = ("hold_reason", "promise_until", "hold_note")
#: Every column of the invoice CSV, in the order :func:`write_invoices_csv` writes them.
STANDARD_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS


INVOICE_CSV_HELP = """\
Invoice CSV: UTF-8 (a byte-order mark is fine), comma-separated (semicolon or
tab also detected), one header row, then one invoice per row.

Required columns:
  invoice_number   unique in the file, e.g. INV-2026-00042 (at most 64 characters)
  customer_email   one address per row, e.g. zoe@example.com (compared
                   case-insensitively; one customer per address; at most 254 characters)
  customer_name    e.g. Zoë Martin (the same address must always have the same name;
                   at most 200 characters)
  currency         ISO 4217 code, e.g. USD, EUR, JPY
  amount_due       plain decimal in major units, no symbols or thousands
                   separators: 1234.50 USD, 1200 JPY, 12.345 BHD, 8491.50 HUF;
                   never more decimals than ISO 4217 gives the currency
  issued_on        YYYY-MM-DD
  due_on           YYYY-MM-DD, not before issued_on
Optional columns:
  customer_locale  e.g. de_DE or pt-BR (new customers: en_US)
  customer_tz      IANA time zone, e.g. America/Chicago (new customers: none,
                   the schedule's zone)
                   Without the column a known customer keeps its own; the
                   column left empty (on every row of that customer) clears it.
  customer_country ISO 3166-1 alpha-2 code, e.g. US, DE (kept and cleared
                   as customer_tz); [[ladders]] match it (country)
  customer_tags    words separated by ; e.g. enterprise;vip (lower-cased;
                   letters, digits, - _ .; at most 20); kept and cleared as
                   customer_tz; [[ladders]] match them (tags_any)
  status           open, paid, void or uncollectible (default open;
                   paid when paid_on is given). Statuses move forward only
                   (open -> paid, void, uncollectible; uncollectible -> paid,
                   void); other rows are counted stale
  paid_on          YYYY-MM-DD; required when status is paid
  status_on        YYYY-MM-DD, the day status was set: a paid invoice is
                   reopened only by status open with a status_on after its
                   payment date, or with --reopen
  payment_url      https:// link to the invoice's pay-now page, shown in
                   its reminders as a button and a plain link (never logged);
                   without the column a stored link is kept, empty clears it
  pdf_path         the invoice's PDF, a path inside [attachments] pdf_dir
                   (docs/attachments.md); without the column a stored path
                   is kept, empty clears it (then <pdf_dir>/<number>.pdf)
  hold_reason      dispute, promise or manual: a hold on the invoice (README
                   "Holds"); importing the same row again places no second one
  promise_until    YYYY-MM-DD, the last day of a promise to pay (required
                   with hold_reason promise, refused with the others)
  hold_note        a few words kept with the hold (at most 500 characters)

Other names for the columns: --map invoice_number=InvoiceNo,customer_email=Email
(our name = your header). Extra columns are ignored. Every row is checked and
every problem reported with its line; nothing is imported unless all rows are
valid, or with --skip-invalid the valid rows are imported and the rejected
ones written to a CSV with an extra "error" column. No value may hold a
control character or an invisible format character (a bidirectional
override such as U+202E, a zero-width space).

Payments CSV: columns invoice_number and paid_on (YYYY-MM-DD).
"""

_ISO_DATES = DateFormat("iso")
#: The optional customer columns a row may give (column, Customer field): a column the file lacks keeps the stored
#: value, an empty cell clears it (:func:`customer_rule`).
_CUSTOMER_FIELDS = (("customer_locale", "locale"), ("customer_tz", "tz"), ("customer_country", "country"),
                    ("customer_tags", "tags"))


@dataclass(frozen=True, kw_only=True, slots=True)
class InvoiceImport:
    """What :func:`read_invoices_csv` found.

    ``customers`` and ``invoices`` come from the valid rows only;
    ``rejected_lines`` holds ``(line, row)`` for every invalid row, ``row``
    keyed by the file's own header names; ``rows_read`` counts data rows
    (blank lines excluded); ``header`` is the file's header as read.
    """

    customers: list[Customer]
    invoices: list[Invoice]
    problems: list[RowProblem]
    rejected_lines: list[tuple[int, dict[str, str]]]
    rows_read: int
    header: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_if_problems(self) -> None:
        """Raise :class:`~oncebeat.errors.ImportRejected` listing the problems, unless there are none."""
        from .problems import raise_if_problems

        raise_if_problems(self.problems, source=self.source, rows_read=self.rows_read)


@dataclass(frozen=True, kw_only=True, slots=True)
class StagedInvoice:
    """One checked row: what it parses to (``None`` where a value is missing or invalid) and whether it is ``bad``.

    ``email`` is set only when valid (lower-cased), ``name`` when not empty (inner whitespace collapsed);
    ``x_locale`` / ``x_tz`` are the locale and zone the row gives explicitly and validly: ``""`` for a column the
    file has but this row leaves empty, None for a column the file does not have (:func:`customer_rule`).
    """

    line: int
    bad: bool
    number: str | None = None
    email: str | None = None
    name: str | None = None
    x_locale: str | None = None
    x_tz: str | None = None
    x_country: str | None = None  # as x_locale: an ISO 3166-1 alpha-2 code, "" or None
    x_tags: str | None = None  # as x_locale: canonical tags text ("a;b"), "" or None
    currency: str | None = None
    amount_due: int | None = None
    issued_on: date | None = None
    due_on: date | None = None
    status: str | None = None
    paid_on: date | None = None
    status_on: date | None = None
    hold_reason: str | None = None
    promise_until: date | None = None
    hold_note: str | None = None
    x_payment_url: str | None = None  # as x_locale: a valid URL, "" (column there, cell empty) or None (no column)
    x_pdf_path: str | None = None  # as x_payment_url: a path, "" (column there, cell empty) or None (no column)

    def invoice(self) -> Invoice:
        """The invoice of a row without problems."""
        assert not self.bad and self.number and self.email and self.currency and self.amount_due is not None
        assert self.issued_on is not None and self.due_on is not None and self.status is not None
        return Invoice(number=self.number, customer_email=self.email, currency=self.currency,
                       amount_due=self.amount_due, issued_on=self.issued_on, due_on=self.due_on, status=self.status,
                       paid_on=self.paid_on, status_on=self.status_on, payment_url=self.x_payment_url,
                       pdf_path=self.x_pdf_path)

    def as_params(self) -> dict[str, Any]:
        """The row as query parameters (the staging table's columns)."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(slots=True)
class _Row:
    """One invoice row being checked: its values, its problems so far and what it parses to."""

    line: int
    source: str
    values: dict[str, str] = field(default_factory=dict)
    problems: list[RowProblem] = field(default_factory=list)
    failed: set[str | None] = field(default_factory=set)  # columns with a problem after the required check
    out: dict[str, Any] = field(default_factory=dict)

    def problem(self, column: str | None, value: str | None, reason: str) -> None:
        self.problems.append(RowProblem(line=self.line, column=column, value=value, reason=reason, source=self.source))

    def columns_with_problems(self) -> set[str | None]:
        return {p.column for p in self.problems}


@dataclass(kw_only=True, slots=True)
class InvoiceRowChecker:
    """The checks of one invoice row that need nothing but the row (see the module docstring)."""

    source: str
    header: list[str]
    positions: Mapping[str, int]
    computed: Sequence[tuple[Computed, Mapping[str, int]]]
    date_format: DateFormat = _ISO_DATES
    default_currency: str | None = None
    due_days: int | None = None
    today: date | None = None

    def check(self, line: int, raw_fields: list[str]) -> tuple[StagedInvoice | None, list[RowProblem]]:
        """Check the data row of file line ``line``: (its values, or None when its fields do not fit the header;
        its problems)."""
        row = _Row(line=line, source=self.source)
        fields, count_reason = fit_fields(self.header, raw_fields)
        if count_reason:
            row.problem(None, None, count_reason)
            return None, row.problems

        values = row.values = row_values(fields, self.positions, self.computed, row.problem)
        if self.default_currency and not values.get("currency") and "currency" not in row.columns_with_problems():
            values["currency"] = self.default_currency
        due_from_terms = self.due_days is not None and not values.get("due_on")
        self._required(row, due_from_terms)
        row.failed = row.columns_with_problems()

        self._number(row)
        email_ok = self._email(row)
        name = " ".join(values.get("customer_name", "").split())
        self._money(row)
        dates = self._dates(row, due_from_terms)
        self._status(row, dates)
        explicit = self._locale_and_zone(row)
        payment_url = self._payment_url(row)
        pdf_path = self._pdf_path(row)
        self._hold(row)
        out = row.out
        staged = StagedInvoice(
            line=line, bad=bool(row.problems), number=out.get("number"), email=out.get("email") if email_ok else None,
            name=name or None, x_locale=explicit.get("locale"), x_tz=explicit.get("tz"),
            x_country=explicit.get("country"), x_tags=explicit.get("tags"), currency=out.get("currency"),
            amount_due=out.get("amount"), issued_on=out.get("issued_on"), due_on=out.get("due_on"),
            status=out.get("status"), paid_on=out.get("paid_on"), status_on=out.get("status_on"),
            hold_reason=out.get("hold_reason"), promise_until=out.get("promise_until"), hold_note=out.get("hold_note"),
            x_payment_url=payment_url, x_pdf_path=pdf_path)
        return staged, row.problems

    @staticmethod
    def _required(row: _Row, due_from_terms: bool) -> None:
        failed = row.columns_with_problems()
        for column in REQUIRED_COLUMNS:
            if column == "due_on" and due_from_terms:
                continue
            if not row.values.get(column) and column not in failed:
                row.problem(column, None, "required value is empty")

    @staticmethod
    def _number(row: _Row) -> None:
        """invoice_number (duplicates across the file: :func:`duplicate_problems`)."""
        number = row.values.get("invoice_number", "")
        if number:
            row.out["number"] = number

    @staticmethod
    def _email(row: _Row) -> bool:
        """customer_email: True when valid (``out["email"]`` holds it lower-cased)."""
        email = row.values.get("customer_email", "")
        if not email:
            return False
        reason = email_reason(email)
        if reason:
            row.problem("customer_email", email, reason)
            return False
        row.out["email"] = email.lower()
        return True

    @staticmethod
    def _money(row: _Row) -> None:
        """currency, then amount_due (precision needs a valid currency; sign and syntax do not)."""
        currency = row.values.get("currency", "")
        currency_ok: str | None = None
        if currency:
            code = currency.upper()
            reason = currency_reason(code)
            if reason is None:
                currency_ok = code
                row.out["currency"] = code
            elif "currency" not in row.failed:
                row.problem("currency", currency, reason)
        amount = row.values.get("amount_due", "")
        if amount:
            minor, reason = amount_minor(amount, currency_ok)
            if reason:
                row.problem("amount_due", amount, reason)
            elif minor is not None:
                row.out["amount"] = minor

    def _dates(self, row: _Row, due_from_terms: bool) -> dict[str, date]:
        """issued_on, due_on (or issued_on + ``due_days``), paid_on and status_on that parse."""
        dates: dict[str, date] = {}
        for column in ("issued_on", "due_on", "paid_on", "status_on"):
            text = row.values.get(column, "")
            if text and column not in row.failed:
                day, reason = read_date(text, self.date_format)
                if day is None:
                    row.problem(column, text, reason or self.date_format.reason)
                else:
                    dates[column] = day
        if due_from_terms and self.due_days is not None and "issued_on" in dates:
            dates["due_on"] = dates["issued_on"] + timedelta(days=self.due_days)
            if date_range_reason(dates["due_on"]):
                row.problem("due_on", None, f"issued_on + {self.due_days} days is outside {DATE_RANGE_TEXT}")
        row.out["issued_on"] = dates.get("issued_on")
        row.out["due_on"] = dates.get("due_on")
        if "issued_on" in dates and "due_on" in dates and dates["due_on"] < dates["issued_on"]:
            row.problem("due_on", row.values["due_on"], f"is before issued_on {dates['issued_on'].isoformat()}")
        return dates

    def _status(self, row: _Row, dates: dict[str, date]) -> None:
        """status, and whether paid_on and status_on agree with it."""
        values, failed = row.values, row.failed
        status_text = values.get("status", "")
        status: str | None = None
        if status_text:
            if status_text.lower() in INVOICE_STATUSES:
                status = status_text.lower()
            elif "status" not in failed:
                row.problem("status", status_text, f"is not a status (use {', '.join(INVOICE_STATUSES[:-1])} or "
                                                   f"{INVOICE_STATUSES[-1]})")
        elif not values.get("paid_on"):
            status = "open"
        paid_text = values.get("paid_on", "")
        if status_text == "" and paid_text:
            status = "paid"
        if status == "paid" and not paid_text and "paid_on" not in failed:
            row.problem("paid_on", None, "is empty, but status is paid (give the payment date, YYYY-MM-DD)")
        elif status is not None and status != "paid" and paid_text:
            row.problem("paid_on", paid_text, f"is set, but status is {status} (clear paid_on or set status to paid)")
        if status == "paid" and "paid_on" in dates:
            reason = paid_on_reason(dates["paid_on"], dates.get("issued_on"), self.today)
            if reason:
                row.problem("paid_on", values["paid_on"], reason)
        if values.get("status_on") and not status_text:
            row.problem("status_on", values["status_on"], "is set, but status is empty (give the status it dates)")
        elif "status_on" in dates and (reason := status_on_reason(dates["status_on"], self.today)):
            row.problem("status_on", values["status_on"], reason)
        row.out["status"] = status
        row.out["paid_on"] = dates.get("paid_on") if status == "paid" else None
        row.out["status_on"] = dates.get("status_on")

    @staticmethod
    def _locale_and_zone(row: _Row) -> dict[str, str]:
        """customer_locale, customer_tz, customer_country and customer_tags (optional); returns those the row gives
        explicitly and validly: a value, or ``""`` when the column is in the file (or computed) but empty on this
        row (an explicit empty value, which clears the stored one). A column the file does not have is left out
        (the stored value is kept)."""
        explicit: dict[str, str] = {}
        for column, key in _CUSTOMER_FIELDS:
            if row.values.get(column) == "" and column not in row.columns_with_problems():
                explicit[key] = ""
        locale_text = row.values.get("customer_locale", "")
        row.out["locale"] = DEFAULT_LOCALE
        if locale_text and "customer_locale" not in row.failed:
            locale, reason = check_locale(locale_text)
            if reason:
                row.problem("customer_locale", locale_text, reason)
            else:
                row.out["locale"] = explicit["locale"] = locale  # type: ignore[assignment]
        zone_text = row.values.get("customer_tz", "")
        row.out["tz"] = DEFAULT_TZ
        if zone_text and "customer_tz" not in row.failed:
            zone, reason = check_zone(zone_text)
            if reason:
                row.problem("customer_tz", zone_text, reason)
            else:
                row.out["tz"] = explicit["tz"] = zone  # type: ignore[assignment]
        for column, key, check in (("customer_country", "country", check_country),
                                   ("customer_tags", "tags", check_tags)):
            text = row.values.get(column, "")
            if text and column not in row.failed:
                value, reason = check(text)
                if reason or value is None:
                    row.problem(column, text, reason or "is not valid")
                else:
                    explicit[key] = value
        return explicit

    @staticmethod
    def _payment_url(row: _Row) -> str | None:
        """payment_url (optional): the https link, ``""`` when the column is there and empty (clears a stored
        one), None when the file has no such column (the stored one is kept)."""
        if "payment_url" not in row.values or "payment_url" in row.failed:
            return None
        text = row.values["payment_url"].strip()
        if not text:
            return ""
        url, reason = check_payment_url(text)
        if reason:
            row.problem("payment_url", text, reason)
        return url

    @staticmethod
    def _pdf_path(row: _Row) -> str | None:
        """pdf_path (optional): the path, ``""`` when the column is there and empty (clears a stored one), None
        when the file has no such column (the stored one is kept)."""
        if "pdf_path" not in row.values or "pdf_path" in row.failed:
            return None
        text = row.values["pdf_path"].strip()
        if not text:
            return ""
        reason = pdf_path_reason(text)
        if reason:
            row.problem("pdf_path", text, reason)
            return None
        return text

    def _hold(self, row: _Row) -> None:
        """hold_reason, promise_until and hold_note (optional): a hold the import places on the invoice."""
        values, failed = row.values, row.failed
        reason_text = values.get("hold_reason", "").strip().lower()
        until_text = values.get("promise_until", "")
        note = " ".join(values.get("hold_note", "").split())
        if reason_text and reason_text not in HOLD_REASONS and "hold_reason" not in failed:
            row.problem("hold_reason", values["hold_reason"], f"is not a hold reason (use {', '.join(HOLD_REASONS)})")
            return
        until: date | None = None
        if until_text and "promise_until" not in failed:
            until, reason = read_date(until_text, self.date_format)
            if until is None:
                row.problem("promise_until", until_text, reason or self.date_format.reason)
                return
        if reason_text == "promise" and until_text == "":
            row.problem("promise_until", None, "is empty, but hold_reason is promise (give the promised date)")
        elif until_text and reason_text != "promise":
            row.problem("promise_until", until_text, "is set, but hold_reason is not promise (set hold_reason "
                                                     "promise or clear promise_until)")
        elif note and not reason_text:
            row.problem("hold_note", values["hold_note"], "is set, but hold_reason is empty")
        elif len(note) > 500:
            row.problem("hold_note", None, f"is {len(note)} characters long (at most 500)")
        elif reason_text:
            row.out["hold_reason"], row.out["promise_until"], row.out["hold_note"] = reason_text, until, note or None



# --------------------------------------------------------------------------- rules across rows


def duplicate_problems(numbered: Iterable[tuple[str, int]], source: str,
                       column: str = "invoice_number") -> Iterator[RowProblem]:
    """``(number, line)`` sorted by number, then line: a problem on both lines of every number given twice."""
    for number, group in itertools.groupby(numbered, key=lambda r: r[0]):
        members = iter(group)
        first = next(members)[1]
        for _, line in members:
            yield RowProblem(line=line, column=column, value=number, reason=f"is a duplicate of line {first}",
                             source=source)
            yield RowProblem(line=first, column=column, value=number, reason=f"is duplicated on line {line}",
                             source=source)


@dataclass(frozen=True, kw_only=True, slots=True)
class CustomerRow:
    """What :func:`customer_rule` reads of a row with a valid email and a name."""

    email: str
    line: int
    name: str
    x_locale: str | None
    x_tz: str | None
    bad: bool
    x_country: str | None = None
    x_tags: str | None = None


def customer_rule(rows: Iterable[CustomerRow], source: str) -> Iterator[RowProblem | Customer]:
    """Rows sorted by email, then line: a problem for each row that disagrees with its email's first row, and
    the :class:`Customer` of each email with a row left without problems.

    The first row of an email gives the name; the first row that gives a locale, zone, country or tags gives it.
    A row whose name differs (case-insensitively), or whose locale, zone, country or tags differ from those given
    before, is reported. Empty cells (``""``: the column is there, the row gives no value) never conflict: the
    customer's field is ``""`` (clear it) only when every row of the email leaves it empty, and None (keep the
    stored one) when the file has no such column (:mod:`oncebeat.reminders.records`).
    """
    for email, group in itertools.groupby(rows, key=lambda r: r.email):
        members = iter(group)
        first = next(members)
        explicit = {key: getattr(first, f"x_{key}") for _, key in _CUSTOMER_FIELDS}
        given_on = dict.fromkeys(explicit, first.line)
        accepted = not first.bad
        for row in members:
            bad = row.bad
            if row.name.casefold() != first.name.casefold():
                bad = True
                yield RowProblem(line=row.line, column="customer_name", value=row.name, source=source,
                                 reason=f"conflicts with {first.name!r} on line {first.line} for the same "
                                        f"customer_email {email}")
            for column, key in _CUSTOMER_FIELDS:
                value = getattr(row, f"x_{key}")
                if value is None or (value == "" and explicit[key] is not None):
                    continue
                if not explicit[key]:
                    explicit[key], given_on[key] = value, row.line
                elif value != explicit[key]:
                    bad = True
                    yield RowProblem(line=row.line, column=column, value=value, source=source,
                                     reason=f"conflicts with {explicit[key]!r} on line {given_on[key]} for the same "
                                            f"customer_email {email}")
            accepted = accepted or not bad
        if accepted:
            yield Customer(email=email, name=first.name, **explicit)


# --------------------------------------------------------------------------- the in-memory reader


def open_invoice_table(path: Path, *, column_map: Mapping[str, str] | None, source: str,
                       date_format: DateFormat, default_currency: str | None, due_days: int | None,
                       today: date | None) -> tuple[CsvTable, InvoiceRowChecker | None, list[RowProblem]]:
    """The table, its row checker (None when the header is unusable) and the file-level problems.

    Raises:
        ImportRejected: the file cannot be read at all.
        ConfigError: ``default_currency`` is not a legal-tender ISO 4217 code.
    """
    if default_currency is not None:
        default_currency = default_currency.strip().upper()
        reason = currency_reason(default_currency)
        if reason:
            raise ConfigError(f"--currency: {default_currency!r} {reason}")
    table = CsvTable(path, source)
    problems = list(table.problems)
    if not table.header:
        return table, None, problems
    provided = (["currency"] if default_currency else []) + (["due_on"] if due_days is not None else [])
    positions, header_problems = resolve_columns(table.header, STANDARD_COLUMNS + HOLD_COLUMNS, REQUIRED_COLUMNS,
                                                 column_map, source, provided)
    problems.extend(header_problems)
    if any(p.line == 1 for p in header_problems):
        return table, None, problems  # the header is unusable: every row is rejected, the problem reported once
    checker = InvoiceRowChecker(source=source, header=table.header, positions=positions,
                                computed=computed_columns(table.header, column_map), date_format=date_format,
                                default_currency=default_currency, due_days=due_days, today=today)
    return table, checker, problems


def read_invoices_csv(
    path: Path,
    *,
    column_map: Mapping[str, str] | None = None,
    source_name: str | None = None,
    date_format: DateFormat = _ISO_DATES,
    default_currency: str | None = None,
    due_days: int | None = None,
    today: date | None = None,
    progress: Progress | None = None,
) -> InvoiceImport:
    """Read and check an invoice CSV (see :data:`INVOICE_CSV_HELP`) into memory; never raises for bad rows.

    For files of any size, ``oncebeat import`` streams instead (:mod:`oncebeat.reminders.bulk`); the checks
    and messages are the same.

    Args:
        column_map: ``{our column: their header, const:VALUE or template:…}`` (see :func:`parse_column_map`).
        source_name: the file name used in messages (default: the file's name).
        date_format: how issued_on, due_on and paid_on are written (default ISO ``YYYY-MM-DD``).
        default_currency: the currency of rows without one (``--currency``); must be legal tender.
        due_days: due date = issued_on + this many days for rows without a due date (``--due-days``).
        today: payments dated after ``today`` + 1 day are refused (None: no such check).
        progress: called with (bytes read, bytes in the file) every 10,000 rows and at the end.
    Raises:
        ImportRejected: the file cannot be read at all.
        ConfigError: ``default_currency`` is not a legal-tender ISO 4217 code.
    """
    path = Path(path)
    source = source_name if source_name is not None else path.name
    table, checker, problems = open_invoice_table(path, column_map=column_map, source=source,
                                                  date_format=date_format, default_currency=default_currency,
                                                  due_days=due_days, today=today)
    if checker is None:
        rejected = [(line, row_dict(table.header, fields)) for line, fields in table.rows()]
        return InvoiceImport(customers=[], invoices=[], problems=problems, rejected_lines=rejected,
                             rows_read=table.rows_read, header=table.header, source=source)
    staged: list[StagedInvoice] = []
    rows: dict[int, list[str]] = {}
    for line, fields in table.rows(progress):
        rows[line] = fields
        row, found = checker.check(line, fields)
        problems.extend(found)
        if row is not None and row.hold_reason is not None:  # not dropped silently: this reader places no hold
            problems.append(RowProblem(line=line, column="hold_reason", value=row.hold_reason, source=source,
                                       reason="holds are placed by `oncebeat import` (the streamed import), not by "
                                              "this reader"))
        if row is not None:
            staged.append(row)
    if table.read_error is not None:
        problems.append(table.read_error)
    problems.extend(duplicate_problems(sorted((s.number, s.line) for s in staged if s.number), source))
    bad = {p.line for p in problems}
    by_email = sorted((CustomerRow(email=s.email, line=s.line, name=s.name, x_locale=s.x_locale, x_tz=s.x_tz,
                                   x_country=s.x_country, x_tags=s.x_tags, bad=s.line in bad)
                       for s in staged if s.email and s.name),
                      key=lambda r: (r.email, r.line))
    customers: dict[str, Customer] = {}
    for found_item in customer_rule(by_email, source):
        if isinstance(found_item, Customer):
            customers[found_item.email] = found_item
        else:
            problems.append(found_item)
    bad = {p.line for p in problems}
    problems.sort(key=lambda p: p.line)
    invoices = [s.invoice() for s in staged if s.line not in bad]
    in_order = dict.fromkeys(i.customer_email for i in invoices)  # the order of their first invoice
    return InvoiceImport(
        customers=[customers[email] for email in in_order],
        invoices=invoices,
        problems=problems,
        rejected_lines=[(line, row_dict(table.header, fields)) for line, fields in rows.items() if line in bad],
        rows_read=table.rows_read,
        header=table.header,
        source=source,
    )
