"""Values of the overdue-invoice domain: customers, invoices, payments.

Money is an integer in minor units (cents for USD, yen for JPY) plus an ISO
4217 code; never a float. Dates are calendar dates (no time, no zone): an
invoice is due on a date, and "days past due" is counted in the schedule's
business zone (DESIGN.md §6).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

__all__ = ["DEFAULT_LOCALE", "DEFAULT_TZ", "Customer", "Invoice", "Payment", "INVOICE_STATUSES", "HOLD_REASONS",
           "REMINDER_STATES",
           "reminder_key", "reminder_id_of_key", "superseded_stages", "with_superseded", "SUPERSEDED_REASON"]

INVOICE_STATUSES = ("open", "paid", "void", "uncollectible")
#: Why reminders of an invoice or customer are held (oncebeat.reminders.holds).
HOLD_REASONS = ("dispute", "promise", "manual")
#: Every state a reminder row may be in (the CHECK of the reminders table, migrations 0001, 0009 and 0013).
REMINDER_STATES = ("pending", "sent", "skipped", "failed", "in_doubt", "held", "deferred")
#: The language of a customer without one (new, or cleared by an explicit empty ``customer_locale``).
DEFAULT_LOCALE = "en_US"
#: The zone of a customer without one of its own: the schedule's zone applies (``send_zone = "customer"`` falls
#: back to it).
DEFAULT_TZ = ""
_KEY_PREFIX = "reminder:"  # the SQL of the scan spells it too: 'reminder:' || r.id


def reminder_key(reminder_id: int) -> str:
    """The effect key and send job's unique key of reminder ``reminder_id``: ``reminder:<id>``."""
    return f"{_KEY_PREFIX}{reminder_id}"


def reminder_id_of_key(key: str) -> int | None:
    """The reminder id in an effect or unique key made by :func:`reminder_key`; None for any other key."""
    head, _, tail = key.partition(":")
    return int(tail) if f"{head}:" == _KEY_PREFIX and tail.isdigit() else None


#: The reason of a superseded stage: "superseded: stage N became due at the same time" (N: the stage sent instead).
SUPERSEDED_REASON = "superseded: stage {stage} became due at the same time"


def superseded_stages(row: dict[str, Any]) -> list[int]:
    """The lower stages reminder ``row`` records superseded (reminders migration 0007), ascending; [] if none.

    ``superseded_stages`` is an integer array on PostgreSQL and a JSON array (text) on SQLite; a row read from
    a database before that migration has no such column.
    """
    value = row.get("superseded_stages")
    if value is None:
        return []
    if isinstance(value, str):
        value = json.loads(value)
    return sorted(int(v) for v in value)


def with_superseded(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reminder rows plus, for each stage a row records superseded, a row of its own as 0.1 stored them.

    Such a row is a copy of the superseding row with ``stage`` = the superseded stage, ``state`` ``skipped``,
    ``reason`` :data:`SUPERSEDED_REASON`, no Message-ID or send time, ``superseded_stages`` None, and
    ``superseded_by`` = the id of the row that records it (None on real rows). Readers that count or show stages
    (``check``, the dashboard) see every recorded stage once this way, stored in either form.
    """
    out: list[dict[str, Any]] = []
    for r in rows:
        out.append(r | {"superseded_by": None})
        for stage in superseded_stages(r):
            out.append(r | {"stage": stage, "state": "skipped", "reason": SUPERSEDED_REASON.format(stage=r["stage"]),
                            "message_id": None, "sent_at": None, "deferred_since": None, "superseded_stages": None,
                            "superseded_by": r["id"], "updated_at": r["created_at"]})
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Customer:
    """A customer, identified by ``email`` (unique, case-insensitive), as one source gives it.

    A field is None when the source does not carry it: writing the customer then keeps the stored value, and a
    new customer gets the default (its email as name, :data:`DEFAULT_LOCALE`, :data:`DEFAULT_TZ`). ``""`` is an
    explicit empty value and clears the stored one (:mod:`oncebeat.reminders.records`).
    """

    email: str
    name: str | None = None
    locale: str | None = None  # a Babel/CLDR locale id such as "de_DE"
    # IANA zone of the customer; "" = none of its own. Used for business dates with send_zone = "customer"
    # (the schedule's zone when "").
    tz: str | None = None
    # ISO 3166-1 alpha-2 code, upper case; "" = unknown (oncebeat.reminders.segments).
    country: str | None = None
    # Canonical tags text: lower-case words sorted and joined by ";" ("enterprise;vip"); "" = none.
    tags: str | None = None


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
    # The invoice's pay-now page (an https URL), shown in its reminders; None when the source does not carry it
    # (the stored one is kept), "" to clear it (oncebeat.reminders.records, as for a customer's fields).
    payment_url: str | None = None
    # The invoice's PDF, a path inside [attachments] pdf_dir (oncebeat.reminders.notices.attachments); None: not
    # carried by the source (the stored one is kept), "" to clear it.
    pdf_path: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Payment:
    """A payment that settles invoice ``number`` on ``paid_on``.

    ``paid_at`` (zone-aware) is the exact instant when known, for exact replays; without it a
    replay applies the payment at the start of ``paid_on`` in the schedule's zone (the business day).
    """

    number: str
    paid_on: date
    paid_at: datetime | None = None
