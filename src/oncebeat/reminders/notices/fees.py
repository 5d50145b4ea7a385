"""Late fees: computed when a notice is rendered, shown in it, recorded once with its stage's ``sent`` (G9).

A stage whose escalation has a fee rule (:class:`~.escalation.FeeRule`, in the invoice's pinned ladder version)
adds a fee to the notice: :func:`fee_for` computes it from the rule and the invoice's amount due (minor units, the
invoice's currency) when the send job renders the message, the notice shows it (templates: ``late_fee``,
``total_with_fee``) and carries it in an ``X-Oncebeat-Fee`` header (``1852 EUR percent 1.5 % (cap 5000)``). The
effect ledger freezes those bytes at the first attempt, so every retry sends the same fee.

:func:`record_fee` writes the fee in the transaction that records the reminder ``sent`` (the effect's ``on_done``,
an operator's "it was delivered", or a later job finding the effect done), taking the amount from the sent
message's header (:func:`fee_of_facts`): what is recorded is what the customer was told. ``reminder_fees`` has
the primary key (invoice_id, stage) and the insert runs only for a reminder in state ``sent``, so a retry, a
resend, a rerun of the scan or ``retry-failed`` never records a second fee: at most one per (invoice, stage). A
fee that rounds to 0 is neither shown nor recorded.

oncebeat reports fees (:func:`fees_between`, ``oncebeat report fees``, the dashboard's reports page); it posts
them to no ledger it does not own: the CSV export is what a team imports into its own books (docs/reports.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...store import Store, Tx
from .escalation import FeeRule

__all__ = ["FEES_HEADER", "FEE_HEADER", "Fee", "all_fees", "fee_for", "fee_of_facts", "fee_totals", "fees_between",
           "fees_header", "fees_of_header", "fees_of_invoice", "record_fee"]

#: The header that carries a notice's fee: ``<amount minor units> <currency> <basis> <rule in words>``.
FEE_HEADER = "X-Oncebeat-Fee"
#: The header of a grouped notice (:mod:`.grouping`) that carries the fee of each row it lists with one:
#: ``<reminder id> <Fee.header()>`` entries separated by ``"; "``, e.g. ``12 2500 EUR fixed fixed 2500; 13 1852 EUR
#: percent 1.5 % (cap 5000)``. A rule in words never contains ``;``.
FEES_HEADER = "X-Oncebeat-Fees"


@dataclass(frozen=True, kw_only=True, slots=True)
class Fee:
    """One notice's late fee: ``amount`` minor units of ``currency``, ``basis`` (fixed, percent), ``rule`` in words."""

    amount: int
    currency: str
    basis: str
    rule: str

    def header(self) -> str:
        """The value of :data:`FEE_HEADER`, e.g. ``2500 EUR fixed fixed 2500``."""
        return f"{self.amount} {self.currency} {self.basis} {self.rule}"

    @classmethod
    def from_header(cls, value: str) -> Fee | None:
        """Back from :meth:`header`; None when ``value`` is not one (a message frozen by another version)."""
        parts = " ".join(value.split()).split(" ", 3)
        if len(parts) != 4 or not parts[0].isdigit() or parts[2] not in ("fixed", "percent"):
            return None
        return cls(amount=int(parts[0]), currency=parts[1], basis=parts[2], rule=parts[3])


def fee_for(rule: FeeRule | None, *, amount_due: int, currency: str) -> Fee | None:
    """The fee ``rule`` gives an invoice of ``amount_due`` minor units of ``currency``; None without a rule or
    when it comes to 0 minor units (:meth:`FeeRule.amount` states the arithmetic)."""
    if rule is None:
        return None
    amount = rule.amount(amount_due)
    if amount <= 0:
        return None
    return Fee(amount=amount, currency=currency, basis=rule.basis, rule=rule.describe())


def fees_header(fees: Mapping[int, Fee]) -> str:
    """The value of :data:`FEES_HEADER` for ``fees`` (reminder id -> its fee), in reminder id order."""
    return "; ".join(f"{int(rid)} {fee.header()}" for rid, fee in sorted(fees.items()))


def fees_of_header(value: str) -> dict[int, Fee]:
    """Back from :func:`fees_header`: reminder id -> fee; an entry that is not one is left out."""
    out: dict[int, Fee] = {}
    for entry in value.split(";"):
        rid, _, rest = " ".join(entry.split()).partition(" ")
        fee = Fee.from_header(rest) if rid.isdigit() else None
        if fee is not None:
            out[int(rid)] = fee
    return out


def fee_of_facts(facts: Mapping[str, Any], reminder_id: int | None = None) -> Fee | None:
    """The fee a sent message carried, from its :func:`~.digest.message_facts` (None: it carried none).

    A single notice carries it in :data:`FEE_HEADER`; a grouped notice in :data:`FEES_HEADER`, one entry per
    listed row with a fee: ``reminder_id`` names the row (a row without an entry carried no fee).
    """
    for name, value in facts.get("headers") or ():
        if str(name).lower() == FEE_HEADER.lower():
            return Fee.from_header(str(value))
        if str(name).lower() == FEES_HEADER.lower() and reminder_id is not None:
            return fees_of_header(str(value)).get(int(reminder_id))
    return None


def record_fee(tx: Tx, *, reminder_id: int, fee: Fee, now: datetime) -> bool:
    """Record ``fee`` for reminder ``reminder_id`` in ``tx`` (the transaction recording it ``sent``).

    Returns True when written; False when its (invoice, stage) already has a fee or the reminder is not sent
    (nothing written: a second fee is never recorded).
    """
    return tx.one("record_fee", reminder_id=reminder_id, amount=fee.amount, currency=fee.currency,
                  basis=fee.basis, rule=fee.rule, now=now) is not None


def fees_between(store: Store, *, since: datetime, until: datetime) -> list[dict[str, Any]]:
    """Fees recorded in ``[since, until)`` (aware instants), oldest first: ``invoice_id, number, customer_name,
    customer_email, stage, amount`` (minor units), ``currency, basis, rule, reminder_id, message_id`` (the notice
    that showed it), ``created_at`` (aware UTC)."""
    return store.read("fees_between", since=since, until=until)


def fees_of_invoice(store: Store, invoice_id: int) -> list[dict[str, Any]]:
    """The fees of invoice ``invoice_id`` by stage: ``stage, amount, currency, basis, rule, reminder_id,
    created_at``."""
    return store.read("fees_of_invoice", invoice_id=invoice_id)


def all_fees(store: Store) -> list[dict[str, Any]]:
    """Every recorded fee: ``invoice_id, number, stage, amount, currency, basis, reminder_id`` (the checker's)."""
    return store.read("all_fees")


def fee_totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Totals of fee ``rows`` per currency: ``[{"currency", "fees", "amount"}]`` (minor units), by currency."""
    totals: dict[str, list[int]] = {}
    for r in rows:
        t = totals.setdefault(str(r["currency"]), [0, 0])
        t[0] += 1
        t[1] += int(r["amount"])
    return [{"currency": c, "fees": n, "amount": a} for c, (n, a) in sorted(totals.items())]
