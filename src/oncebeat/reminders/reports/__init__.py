"""Collection reports: DSO (countback), CEI, aging, per-stage effectiveness, promises and disputes, per currency.

Every figure is computed from the stored invoices, reminders and holds by SQL that aggregates (``sql/*/reports.sql``),
so a book of a million invoices never becomes a million Python objects; the formulas, the data each one reads and
what "not enough data" means are in docs/reports.md. Amounts of different currencies are never added.

Reports (``KINDS``): ``dso``, ``cei`` (one table each, per currency and month), ``stages``, ``aging``,
``promises``, ``disputes``; ``holds`` is promises and disputes together; ``fees``: the late fees recorded
(:mod:`.fees`, the export a team posts to its ledger).

Example::

    tables = build(store, "dso", first=Month(2026, 1), last=Month(2026, 6), as_of=date(2026, 7, 3))
    for line in text_lines(tables[0]):
        print(line)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from typing import Any

from ...errors import OncebeatError
from ...store import Store
from .commitments import OUTCOMES, DisputeRow, PromiseRow, disputes, promises
from .effectiveness import WINDOWS, StageGroup, StageRow, stage_effectiveness
from .fees import fees_table
from .months import Month, MonthError, month_range
from .receivables import MonthFigures, countback_dso, month_figures
from .tables import Column, Table, cell_text, csv_text, json_table, text_lines

__all__ = ["EVERY", "KINDS", "WINDOWS", "Column", "DisputeRow", "Month", "MonthError", "MonthFigures", "PromiseRow",
           "ReportError", "StageGroup", "StageRow", "Table", "build", "build_many", "cell_text", "check_currency",
           "countback_dso", "csv_text", "default_range", "disputes", "json_table", "month_figures", "month_range",
           "promises", "report_document", "stage_effectiveness", "stages_table", "text_lines"]

KINDS: tuple[str, ...] = ("dso", "cei", "stages", "aging", "promises", "disputes", "holds", "fees")
#: What ``all`` means (``oncebeat report``, ``GET /api/v1/reports``): every table once, for a monthly review.
EVERY: tuple[str, ...] = ("dso", "cei", "stages", "aging", "holds")
_CODE = re.compile(r"[A-Z]{3}")


class ReportError(OncebeatError):
    """A report asked with an unknown kind or currency (the message names the option and the fix)."""


def check_currency(code: str | None) -> str | None:
    """An ISO 4217 code as given (three capital letters) or None; raises :class:`ReportError` otherwise."""
    if code is None:
        return None
    if not _CODE.fullmatch(code):
        raise ReportError(f"--currency: {code!r} is not an ISO 4217 code; write three capital letters, e.g. EUR")
    return code


def default_range(as_of: date, first: Month | None, last: Month | None) -> tuple[Month, Month]:
    """``--to`` defaults to the month of ``as_of`` (shown "not over" where a figure needs the whole month) and
    ``--from`` to 11 months before ``--to`` (a year)."""
    end = last or Month.of(as_of)
    return first or end.shift(-11), end


def build(store: Store, kind: str, *, first: Month, last: Month, as_of: date,
          currency: str | None = None) -> list[Table]:
    """The tables of one report ``kind`` (see :data:`KINDS`).

    Args:
        first, last: the months reported, inclusive.
        as_of: today in the business zone: what is "over", what is past due.
        currency: one ISO 4217 code, or None for every currency (each on its own rows).

    Raises:
        ReportError: an unknown kind or a malformed currency. MonthError: ``first`` after ``last``, too long a range.
    """
    return build_many(store, (kind,), first=first, last=last, as_of=as_of, currency=currency)


def build_many(store: Store, kinds: Sequence[str], *, first: Month, last: Month, as_of: date,
               currency: str | None = None) -> list[Table]:
    """The tables of several kinds, in order; DSO and CEI share one read of the receivables. Same arguments and
    errors as :func:`build`."""
    check_currency(currency)
    month_range(first, last)
    for kind in kinds:
        if kind not in KINDS:
            raise ReportError(f"unknown report {kind!r}; choose one of {', '.join(KINDS)}")
    figures: list[MonthFigures] | None = None
    tables: list[Table] = []
    for kind in kinds:
        if kind in ("dso", "cei"):
            if figures is None:
                figures = month_figures(store, first=first, last=last, as_of=as_of, currency=currency)
            tables.append(_dso(figures) if kind == "dso" else _cei(figures))
        elif kind == "stages":
            tables.append(stages_table(stage_effectiveness(store, first=first, last=last, as_of=as_of,
                                                           currency=currency)))
        elif kind == "aging":
            tables.append(_aging(store, as_of, currency))
        elif kind == "fees":
            tables.append(fees_table(store, first=first, last=last, currency=currency))
        else:  # promises, disputes, holds (both)
            if kind != "disputes":
                tables.append(_promises(promises(store, first=first, last=last, as_of=as_of, currency=currency)))
            if kind != "promises":
                tables.append(_disputes(disputes(store, first=first, last=last, currency=currency)))
    return tables


def report_document(tables: Sequence[Table], *, as_of: date, first: Month, last: Month,
                    currency: str | None) -> dict[str, Any]:
    """The JSON answer of ``oncebeat report --json`` and ``GET /api/v1/reports``: ``{"as_of": "YYYY-MM-DD",
    "from": "YYYY-MM", "to": "YYYY-MM", "currency": code or None, "reports": [json_table(t), …]}`` (amounts in
    minor units, null where the data cannot give a figure)."""
    return {"as_of": as_of.isoformat(), "from": str(first), "to": str(last), "currency": currency,
            "reports": [json_table(t) for t in tables]}


def _dso(rows: list[MonthFigures]) -> Table:
    t = Table("dso", "Days sales outstanding (countback), per currency and month end", [
        Column("currency", "currency"), Column("month", "month"),
        Column("receivables", "receivables at month end", "money"), Column("credit_sales", "credit sales", "money"),
        Column("dso", "DSO (days)", "days"), Column("note", "not enough data")])
    t.rows = [{"currency": r.currency, "month": str(r.month), "receivables": r.end_receivables,
               "credit_sales": r.credit_sales, "dso": r.dso, "note": r.note or ""} for r in rows]
    t.notes.append("DSO: walk back from the month end, subtracting each month's credit sales from the receivables "
                   "until they are used up; the last month counts by the share of its days (docs/reports.md).")
    return t


def _cei(rows: list[MonthFigures]) -> Table:
    t = Table("cei", "Collection effectiveness index, per currency and month", [
        Column("currency", "currency"), Column("month", "month"),
        Column("begin_receivables", "beginning receivables", "money"),
        Column("credit_sales", "credit sales", "money"), Column("end_receivables", "ending receivables", "money"),
        Column("end_current", "ending current", "money"), Column("collected", "collected", "money"),
        Column("cei", "CEI", "percent"), Column("note", "not enough data")])
    t.rows = [{"currency": r.currency, "month": str(r.month), "begin_receivables": r.begin_receivables,
               "credit_sales": r.credit_sales, "end_receivables": r.end_receivables, "end_current": r.end_current,
               "collected": r.collected, "cei": r.cei, "note": r.note or r.cei_note or ""} for r in rows]
    t.notes.append("CEI = (beginning receivables + credit sales - ending receivables) / (beginning receivables + "
                   "credit sales - ending current receivables) x 100 (docs/reports.md).")
    return t


def stages_table(rows: list[StageRow]) -> Table:
    """The ``stages`` table of :func:`build` from its rows (live, or a stored run's: :mod:`.runs`)."""
    columns = [Column("stage", "stage (days)", "count"), Column("group", "group"),
               Column("unpaid", "unpaid at stage", "count"), Column("undated", "of which paid, no date", "count")]
    for n in WINDOWS:
        columns += [Column(f"paid_{n}d", f"paid within {n} d", "share"), Column(f"of_{n}d", f"of ({n} d over)",
                                                                                 "count")]
    t = Table("stages", "Stage effectiveness: share of invoices unpaid at a stage and paid within N days", columns)
    no_baseline = []
    for r in rows:
        for name, group in (("reminded", r.reminded), ("baseline", r.baseline)):
            row: dict[str, object] = {"stage": r.stage, "group": name, "unpaid": group.unpaid,
                                      "undated": group.undated}
            for n in WINDOWS:
                row[f"paid_{n}d"], row[f"of_{n}d"] = group.share(n), group.eligible.get(n, 0)
            t.rows.append(row)
        if r.baseline.unpaid == 0:
            no_baseline.append(str(r.stage))
    t.notes.append("reminded: invoices whose stage was sent, from its send date; baseline: invoices not reminded by "
                   "due date + stage, from that day (one reminded within a window before paying is left out of it). "
                   "n/a: no invoice's window is over yet.")
    if no_baseline:
        t.notes.append(f"no baseline for stage(s) {', '.join(no_baseline)}: every invoice unpaid then was reminded.")
    return t


def _aging(store: Store, as_of: date, currency: str | None) -> Table:
    t = Table("aging", f"Open invoices by calendar days past due on {as_of.isoformat()}, per currency", [
        Column("currency", "currency"), Column("bucket", "days past due"), Column("invoices", "invoices", "count"),
        Column("amount", "amount", "money")])
    t.rows = [{"currency": r["currency"], "bucket": r["bucket"], "invoices": int(r["invoices"]),
               "amount": int(r["amount"])}
              for r in store.read("aging", as_of=as_of) if currency is None or r["currency"] == currency]
    return t


def _promises(rows: list[PromiseRow]) -> Table:
    t = Table("promises", "Promises to pay, per currency and month of the promised date", [
        Column("currency", "currency"), Column("month", "month"), Column("promises", "promises", "count"),
        *[Column(o, o, "count") for o in OUTCOMES], Column("kept_rate", "kept of decided", "share"),
        Column("amount", "amount promised", "money"), Column("amount_kept", "paid by the date", "money")])
    t.rows = [{"currency": r.currency, "month": str(r.month), "promises": sum(r.counts.values()),
               **{o: r.counts.get(o, 0) for o in OUTCOMES}, "kept_rate": r.kept_rate, "amount": r.amount,
               "amount_kept": r.amount_kept} for r in rows]
    return t


def _disputes(rows: list[DisputeRow]) -> Table:
    t = Table("disputes", "Disputes, per currency and month opened (UTC date)", [
        Column("currency", "currency"), Column("month", "month"), Column("disputes", "disputes", "count"),
        Column("released", "resolved", "count"), Column("amount", "disputed", "money"),
        Column("amount_paid", "paid since", "money"), Column("amount_void", "voided", "money"),
        Column("amount_unpaid", "still unpaid", "money")])
    t.rows = [{"currency": r.currency, "month": str(r.month), "disputes": r.disputes, "released": r.released,
               "amount": r.amount, "amount_paid": r.amount_paid, "amount_void": r.amount_void,
               "amount_unpaid": r.amount_unpaid} for r in rows]
    return t
