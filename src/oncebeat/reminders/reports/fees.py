"""The late fees report: every fee recorded in the months reported, and the totals per currency (issue 24.4).

oncebeat records each late fee once per (invoice, stage) (:mod:`oncebeat.reminders.notices.fees`) and posts it to
no ledger: this table is the export a team posts to its own books (``oncebeat report fees --csv``, amounts in major
units next to their currency; ``--json`` in minor units). A fee counts in the month (UTC date) it was recorded,
which is the moment its notice was accepted by the mail server. Amounts of different currencies are never added.
"""

from __future__ import annotations

from datetime import UTC, datetime, time

from ...store import Store
from ..notices.fees import fee_totals, fees_between
from .months import Month
from .tables import Column, Table

__all__ = ["fees_table"]


def fees_table(store: Store, *, first: Month, last: Month, currency: str | None = None) -> Table:
    """The fees recorded from the first day of ``first`` to the end of ``last`` (UTC dates), oldest first; one
    currency or every one. Columns: recorded (UTC), invoice, customer, email, stage, currency, amount (money), basis,
    rule, notice (its Message-ID). Notes: the count and total per currency."""
    since = datetime.combine(first.start, time(0), tzinfo=UTC)
    until = datetime.combine(last.shift(1).start, time(0), tzinfo=UTC)
    rows = [r for r in fees_between(store, since=since, until=until) if currency is None or r["currency"] == currency]
    t = Table("fees", "Late fees recorded, per notice (UTC time), for posting to your ledger", [
        Column("recorded", "recorded (UTC)"), Column("invoice", "invoice"), Column("customer", "customer"),
        Column("email", "email"), Column("stage", "stage (days)", "count"), Column("currency", "currency"),
        Column("amount", "fee", "money"), Column("basis", "basis"), Column("rule", "rule"),
        Column("notice", "notice Message-ID")])
    t.rows = [{"recorded": r["created_at"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"), "invoice": r["number"],
               "customer": r["customer_name"], "email": r["customer_email"], "stage": int(r["stage"]),
               "currency": r["currency"], "amount": int(r["amount"]), "basis": r["basis"], "rule": r["rule"],
               "notice": r["message_id"] or ""} for r in rows]
    for total in fee_totals(rows):
        t.notes.append(f"{total['currency']}: {total['fees']} fee(s), {total['amount']} minor units in total.")
    t.notes.append("One fee per invoice and stage, recorded with the notice that showed it; oncebeat posts fees to no "
                   "ledger: import this export (--csv) into your own books (docs/reports.md).")
    return t
