"""Values of the overdue-invoice domain: customers, invoices, payments.

Money is an integer in minor units (cents for USD, yen for JPY) plus an ISO
4217 code; never a float. Dates are calendar dates (no time, no zone): an
invoice is due on a date, and "days past due" is counted in the schedule's
business zone (DESIGN.md §6).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

__all__ = ["Customer", "Invoice", "Payment", "INVOICE_STATUSES", "reminder_key", "reminder_id_of_key"]

INVOICE_STATUSES = ("open", "paid", "void", "uncollectible")
_KEY_PREFIX = "reminder:"  # the SQL of the scan spells it too: 'reminder:' || r.id


def reminder_key(reminder_id: int) -> str:
    """The effect key and send job's unique key of reminder ``reminder_id``: ``reminder:<id>``."""
    return f"{_KEY_PREFIX}{reminder_id}"


def reminder_id_of_key(key: str) -> int | None:
    """The reminder id in an effect or unique key made by :func:`reminder_key`; None for any other key."""
    head, _, tail = key.partition(":")
    return int(tail) if f"{head}:" == _KEY_PREFIX and tail.isdigit() else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Customer:
    """A customer, identified by ``email`` (unique, case-insensitive)."""

    email: str
    name: str
    locale: str = "en_US"  # a Babel/CLDR locale id such as "de_DE"
    # IANA zone of the customer; "" = none of its own. Used for business dates with send_zone = "customer"
    # (the schedule's zone when "").
    tz: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Invoice:
    """An invoice, identified by ``number`` (unique)."""

    number: str
    customer_email: str
    currency: str  # ISO 4217 code, upper case
    amount_due: int  # minor units of ``currency``
    issued_on: date
    due_on: date
    status: str = "open"  # one of INVOICE_STATUSES
    paid_on: date | None = None
    # The date ``status`` was set (optional): a paid invoice is reopened only by a status dated after its payment.
    status_on: date | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Payment:
    """A payment that settles invoice ``number`` on ``paid_on``.

    ``paid_at`` (zone-aware) is the exact instant when known, for exact replays; without it a
    replay applies the payment at the start of ``paid_on`` in the schedule's zone (the business day).
    """

    number: str
    paid_on: date
    paid_at: datetime | None = None
