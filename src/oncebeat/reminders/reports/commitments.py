"""Promises to pay (kept, broken) and disputes, from the holds operators and Stripe placed (reminders/holds.py).

Which invoices a hold covers: the invoice it names; for a hold on a customer, the customer's invoices issued on or
before the hold's date (the UTC date it was placed) and not paid before that date. Amounts are per currency
(minor units); a customer-wide hold whose invoices are in two currencies counts once in each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from fractions import Fraction

from ...store import Store
from .months import Month

__all__ = ["DisputeRow", "OUTCOMES", "PromiseRow", "disputes", "promises"]

#: A promise's outcome: kept (every covered invoice paid by promise_until), broken (its date passed unpaid),
#: pending (its date is today or later), unknown (a covered invoice is paid without a payment date).
OUTCOMES: tuple[str, ...] = ("kept", "broken", "pending", "unknown")


@dataclass(frozen=True, kw_only=True, slots=True)
class PromiseRow:
    """Promises of one currency whose ``promise_until`` falls in ``month``: how many per outcome, the amount they
    covered and the amount paid by the promised date (minor units)."""

    currency: str
    month: Month
    counts: dict[str, int]
    amount: int
    amount_kept: int

    @property
    def kept_rate(self) -> Fraction | None:
        """kept / (kept + broken); None when no promise of the month is decided yet."""
        decided = self.counts.get("kept", 0) + self.counts.get("broken", 0)
        return Fraction(self.counts.get("kept", 0), decided) if decided else None


@dataclass(frozen=True, kw_only=True, slots=True)
class DisputeRow:
    """Disputes of one currency opened in ``month``: how many, how many released (resolved), and the disputed
    amount split by what became of each invoice: paid, voided, still unpaid (minor units)."""

    currency: str
    month: Month
    disputes: int
    released: int
    amount: int
    amount_paid: int
    amount_void: int
    amount_unpaid: int


def promises(store: Store, *, first: Month, last: Month, as_of: date, currency: str | None = None) -> list[PromiseRow]:
    """Promises whose date is in ``first`` .. ``last``, per currency and month, ordered so.

    Args:
        as_of: today in the business zone (a promise dated today or later is still pending).
    """
    rows: dict[tuple[str, str], dict[str, int]] = {}
    amounts: dict[tuple[str, str], list[int]] = {}
    for r in store.read("report_promises", start=first.start, end=last.end, as_of=as_of, currency=currency):
        key = (r["currency"], r["month"])
        rows.setdefault(key, {})[r["outcome"]] = int(r["promises"])
        total = amounts.setdefault(key, [0, 0])
        total[0] += int(r["amount"])
        total[1] += int(r["amount_kept"])
    return [PromiseRow(currency=cur, month=Month.parse(m), counts=rows[(cur, m)], amount=amounts[(cur, m)][0],
                       amount_kept=amounts[(cur, m)][1]) for cur, m in sorted(rows)]


def disputes(store: Store, *, first: Month, last: Month, currency: str | None = None) -> list[DisputeRow]:
    """Disputes opened (UTC date placed) in ``first`` .. ``last``, per currency and month, ordered so."""
    return [DisputeRow(currency=r["currency"], month=Month.parse(r["month"]), disputes=int(r["disputes"]),
                       released=int(r["released"]), amount=int(r["amount"]), amount_paid=int(r["amount_paid"]),
                       amount_void=int(r["amount_void"]), amount_unpaid=int(r["amount_unpaid"]))
            for r in store.read("report_disputes", start=first.start, end=last.end, currency=currency)]
