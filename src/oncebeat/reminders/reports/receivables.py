"""DSO (countback) and CEI per currency and month, from the invoices alone (docs/reports.md, "DSO" and "CEI").

Receivables at a month's end ``E`` (its last day) are the ``amount_due`` of every invoice, not void, with
``issued_on <= E`` that was not paid by then (``status = 'paid'`` with ``paid_on <= E``); uncollectible invoices stay
receivable (never collected). *Current* receivables are those of them not past due at ``E`` (``due_on >= E``).
Credit sales of a month are the ``amount_due`` of the invoices (not void) issued in it.

The SQL returns, per (currency, month), the amounts that enter and leave each set (``report_receivable_moves``);
running sums over months give the month-end values, so the database aggregates and Python only walks a few rows
per currency and month, whatever the size of the book.

Not enough data (the figure is None and ``note`` says why, never a guess):

* the month is not over on ``as_of`` (its last day is not before ``as_of``);
* the month is before the currency's first invoice (the book may start there; earlier is unknown);
* a paid invoice of the currency issued in or before the month has no payment date (its month ends cannot be
  placed);
* CEI only: nothing was due to collect (the denominator is 0).

Example::

    rows = month_figures(store, first=Month(2026, 1), last=Month(2026, 3), as_of=date(2026, 4, 2))
    rows[0].dso  # Fraction of days, or None with rows[0].note
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from typing import Any

from ...store import Store, Tx
from .months import Month, month_range

__all__ = ["MonthFigures", "compact_receivable_moves", "countback_dso", "month_figures"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MonthFigures:
    """One currency's month. Amounts are minor units of ``currency``; ``dso`` is in days, ``cei`` in percent, both
    exact fractions; None with ``note`` (or ``cei_note``) when the data cannot give them."""

    currency: str
    month: Month
    begin_receivables: int | None
    credit_sales: int | None
    collected: int | None
    end_receivables: int | None
    end_current: int | None
    dso: Fraction | None
    cei: Fraction | None
    note: str | None = None
    cei_note: str | None = None

    @property
    def end_overdue(self) -> int | None:
        """Receivables past due at the month's end (minor units)."""
        if self.end_receivables is None or self.end_current is None:
            return None
        return self.end_receivables - self.end_current


def countback_dso(receivables: int, sales: Callable[[Month], int], month: Month, first: Month) -> Fraction | None:
    """Days of sales outstanding by the countback method, at the end of ``month``.

    Walk back from ``month``: while the receivables left exceed a month's credit sales, subtract them and add the
    month's days; the month that exhausts them adds its days times (receivables left / its sales). Returns None
    when the walk passes ``first`` (the oldest month with data) with receivables left, which the definitions make
    impossible (receivables never exceed the sales made so far) but is refused rather than guessed.

    Args:
        receivables: receivables at the end of ``month``, minor units.
        sales: credit sales of a month, minor units.
    """
    left = Fraction(receivables)
    days = Fraction(0)
    current = month
    while left > 0:
        if current < first:
            return None
        sold = sales(current)
        if sold >= left:
            return days + Fraction(current.days) * left / sold
        left -= sold
        days += current.days
        current = current.shift(-1)
    return days


def compact_receivable_moves(tx: Tx) -> None:
    """Fold ``receivable_moves`` (reminders 0023: rows of differences the triggers on invoices add) into one row per
    (currency, month, kind), so DSO and CEI read about as many rows as there are months with invoices times five
    kinds, plus a day's changes. The sums, and so every figure, are the same before and after; on PostgreSQL the
    fold is one statement (one snapshot), so concurrent writers neither wait on it nor lose a row."""
    last = tx.run("receivable_moves_last")
    if not last or last[0]["id"] is None:
        return
    tx.run("receivable_moves_fold", upto=int(last[0]["id"]))
    if tx.backend == "sqlite":  # PostgreSQL's fold deleted the rows it summed in the same statement
        tx.run("receivable_moves_drop", upto=int(last[0]["id"]))


def month_figures(store: Store, *, first: Month, last: Month, as_of: date,
                  currency: str | None = None) -> list[MonthFigures]:
    """DSO and CEI with their inputs for each currency that has invoices and each month ``first`` .. ``last``.

    Args:
        as_of: today in the business zone; a month is over when its last day is before it.
        currency: one ISO 4217 code, or None for every currency (each reported on its own).

    Returns:
        Rows ordered by currency, then month.

    Raises:
        MonthError: ``first`` after ``last`` or too long a range.
    """
    months = month_range(first, last)
    moves: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for r in store.read("report_receivable_moves", currency=currency):
        moves[r["currency"]][r["month"]][r["kind"]] = int(r["n"] if r["kind"] == "undated" else r["amount"])
    out: list[MonthFigures] = []
    for cur in sorted(moves):
        out.extend(_currency(cur, moves[cur], months, as_of))
    return out


def _currency(cur: str, by_month: dict[str, dict[str, int]], months: list[Month], as_of: date) -> list[MonthFigures]:
    def kind(m: Month, name: str) -> int:
        return by_month.get(str(m), {}).get(name, 0)

    sold_in = [Month.parse(k) for k, v in by_month.items() if "sales" in v]
    undated_in = [Month.parse(k) for k, v in by_month.items() if v.get("undated")]
    data_from = min(sold_in)  # every non-void invoice has sales in its issue month
    undated_from = min(undated_in) if undated_in else None
    # Running sums from the first month with data to the last month asked: month-end receivables and current.
    receivable: dict[Month, int] = {}
    current: dict[Month, int] = {}
    r_sum = c_sum = 0
    m = data_from
    while m <= months[-1]:  # at most a few hundred months: dates are checked on import
        r_sum += kind(m, "sales") - kind(m, "settled")
        c_sum += kind(m, "current_in") - kind(m, "current_out")
        receivable[m], current[m] = r_sum, c_sum
        m = m.shift(1)
    rows: list[MonthFigures] = []
    for m in months:
        note = _why_not(cur, m, as_of, data_from, undated_from, by_month)
        if note is not None:
            rows.append(MonthFigures(currency=cur, month=m, begin_receivables=None, credit_sales=None,
                                     collected=None, end_receivables=None, end_current=None, dso=None, cei=None,
                                     note=note))
            continue
        begin = receivable.get(m.shift(-1), 0)  # 0 before data_from: the book starts with the currency's first invoice
        sales, end, end_current = kind(m, "sales"), receivable[m], current[m]
        collected = begin + sales - end
        due = begin + sales - end_current
        dso = countback_dso(end, lambda k: kind(k, "sales"), m, data_from)
        rows.append(MonthFigures(
            currency=cur, month=m, begin_receivables=begin, credit_sales=sales, collected=collected,
            end_receivables=end, end_current=end_current, dso=dso,
            cei=Fraction(collected * 100, due) if due > 0 else None,
            note=None if dso is not None else "the countback ran out of months (inconsistent data)",
            cei_note=None if due > 0 else "nothing was due to collect"))
    return rows


def _why_not(cur: str, m: Month, as_of: date, data_from: Month, undated_from: Month | None,
             by_month: dict[str, Any]) -> str | None:
    if m.end >= as_of:
        return f"month not over on {as_of.isoformat()}"
    if m < data_from:
        return f"no {cur} invoice before {data_from}"
    if undated_from is not None and m >= undated_from:
        n = sum(v.get("undated", 0) for k, v in by_month.items() if Month.parse(k) <= m)
        return f"{n} paid {cur} invoice(s) issued by {m} have no payment date"
    return None
