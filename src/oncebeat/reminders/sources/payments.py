"""Payment rows of a CSV file (``invoice_number``, ``paid_on``, optional ``paid_at``): per-row checks and the
in-memory reader.

The rules that need the database (the invoice exists, the payment is not dated before its issue) run where
the payments are applied (:mod:`oncebeat.reminders.bulk`, :meth:`ReminderService.apply_payments`); an invoice
number given twice in the file is reported on both lines (:func:`~.invoices.duplicate_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ..conversions import Computed, DateFormat
from ..model import Payment
from .invoices import duplicate_problems
from .problems import RowProblem
from .table import CsvTable, computed_columns, fit_fields, resolve_columns, row_values
from .values import paid_on_reason, read_date, read_instant

__all__ = ["PAYMENT_COLUMNS", "PAYMENT_OPTIONAL_COLUMNS", "PaymentRowChecker", "StagedPayment", "open_payment_table",
           "read_payments_csv"]

#: Columns of the payments CSV (both required).
PAYMENT_COLUMNS: tuple[str, ...] = ("invoice_number", "paid_on")
#: Optional column of the payments CSV: the exact instant (ISO with offset), for exact replays.
PAYMENT_OPTIONAL_COLUMNS: tuple[str, ...] = ("paid_at",)

_ISO_DATES = DateFormat("iso")


@dataclass(frozen=True, kw_only=True, slots=True)
class StagedPayment:
    """One checked payment row; ``number`` and ``paid_on`` are set when readable, ``bad`` when it has a problem."""

    line: int
    bad: bool
    number: str | None = None
    paid_on: date | None = None
    paid_at: datetime | None = None

    def payment(self) -> Payment:
        assert not self.bad and self.number and self.paid_on is not None
        return Payment(number=self.number, paid_on=self.paid_on, paid_at=self.paid_at)

    def as_params(self) -> dict[str, Any]:
        return {"line": self.line, "bad": self.bad, "number": self.number, "paid_on": self.paid_on,
                "paid_at": self.paid_at}


@dataclass(kw_only=True, slots=True)
class PaymentRowChecker:
    """The checks of one payment row that need nothing but the row.

    Payments dated after ``today`` + 1 day are refused when ``today`` is given; ``paid_at`` (an ISO instant with
    offset) is the exact moment for replays, its local date not checked against ``paid_on`` (zones differ).
    """

    source: str
    header: list[str]
    positions: Mapping[str, int]
    computed: Sequence[tuple[Computed, Mapping[str, int]]]
    date_format: DateFormat = _ISO_DATES
    today: date | None = None

    def check(self, line: int, raw_fields: list[str]) -> tuple[StagedPayment | None, list[RowProblem]]:
        problems: list[RowProblem] = []

        def problem(column: str | None, value: str | None, reason: str) -> None:
            problems.append(RowProblem(line=line, column=column, value=value, reason=reason, source=self.source))

        fields, count_reason = fit_fields(self.header, raw_fields)
        if count_reason:
            problem(None, None, count_reason)
            return None, problems
        values = row_values(fields, self.positions, self.computed, problem)
        failed = {p.column for p in problems}
        number, paid_text = values.get("invoice_number", ""), values.get("paid_on", "")
        for column in PAYMENT_COLUMNS:
            if not values.get(column) and column not in failed:
                problem(column, None, "required value is empty")
        paid_on = None
        if paid_text:
            paid_on, reason = read_date(paid_text, self.date_format)
            if reason:
                problem("paid_on", paid_text, reason)
            elif paid_on is not None and (reason := paid_on_reason(paid_on, None, self.today)):
                problem("paid_on", paid_text, reason)
                paid_on = None
        paid_at = None
        if values.get("paid_at"):
            paid_at, reason = read_instant(values["paid_at"])
            if reason:
                problem("paid_at", values["paid_at"], reason)
        staged = StagedPayment(line=line, bad=bool(problems), number=number or None, paid_on=paid_on,
                               paid_at=paid_at)
        return staged, problems


def open_payment_table(path: Path, *, column_map: Mapping[str, str] | None, source: str, date_format: DateFormat,
                       today: date | None) -> tuple[CsvTable, PaymentRowChecker | None, list[RowProblem]]:
    """The table, its row checker (None when the header is unusable) and the file-level problems.

    Raises:
        ImportRejected: the file cannot be read at all.
    """
    table = CsvTable(path, source)
    problems = list(table.problems)
    if not table.header:
        return table, None, problems
    positions, header_problems = resolve_columns(table.header, PAYMENT_COLUMNS + PAYMENT_OPTIONAL_COLUMNS,
                                                 PAYMENT_COLUMNS, column_map, source)
    problems.extend(header_problems)
    if header_problems:
        return table, None, problems
    checker = PaymentRowChecker(source=source, header=table.header, positions=positions,
                                computed=computed_columns(table.header, column_map), date_format=date_format,
                                today=today)
    return table, checker, problems


def read_payments_csv(
    path: Path,
    *,
    column_map: Mapping[str, str] | None = None,
    source_name: str | None = None,
    date_format: DateFormat = _ISO_DATES,
    today: date | None = None,
) -> tuple[list[Payment], list[RowProblem]]:
    """Read a payments CSV into memory; never raises for bad rows. Returns (payments, problems).

    Only rows without problems become payments. An invoice number given twice is reported on both lines
    (even with the same date: the file is ambiguous). A payment before its invoice's issue date is refused when
    the payment is applied (the invoice is in the database). ``oncebeat import --payments`` streams instead
    (:mod:`oncebeat.reminders.bulk`), with the same checks and messages.
    """
    path = Path(path)
    source = source_name if source_name is not None else path.name
    table, checker, problems = open_payment_table(path, column_map=column_map, source=source,
                                                  date_format=date_format, today=today)
    if checker is None:
        return [], problems
    staged: list[StagedPayment] = []
    for line, fields in table.rows():
        row, found = checker.check(line, fields)
        problems.extend(found)
        if row is not None:
            staged.append(row)
    if table.read_error is not None:
        problems.append(table.read_error)
    problems.extend(duplicate_problems(sorted((s.number, s.line) for s in staged if s.number), source))
    bad = {p.line for p in problems}
    problems.sort(key=lambda p: p.line)
    return [s.payment() for s in staged if s.line not in bad], problems
