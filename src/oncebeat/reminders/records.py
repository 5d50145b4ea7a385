"""How every source writes customers and invoices: one merge rule, one status transition rule.

Every writer goes through here: the CSV import (:mod:`.bulk`), the Stripe import, the demo and the simulator
(:meth:`.service.ReminderService.upsert`), the payments imports, the Stripe webhook (:mod:`.stripe`); the
team's own database and the API are meant to call the same functions.

Customers: an import never erases what it does not carry
---------------------------------------------------------
A :class:`~.model.Customer` carries ``None`` for a field its source does not give: a CSV without a
``customer_tz``, ``customer_locale``, ``customer_country`` or ``customer_tags`` column, a Stripe invoice (which
carries no zone or language), a Stripe invoice
without ``customer_name``. Such a field **keeps the stored value** (a new customer gets the default: its email
as name, ``en_US``, no zone of its own). An **explicit empty value clears** it: a ``customer_tz`` column that
is present but empty on every row of that customer resets the zone to none (the schedule's) and an empty
``customer_locale`` the language to ``en_US``. :func:`customer_params` is the rule; ``upsert_customer`` applies
it with ``COALESCE``.

Invoices: one status transition rule
------------------------------------
:func:`write_invoices` (imports) and :func:`move_status` (a payment, a webhook) move a status only through the
``move_invoice_status`` query, checked on the row as it is when written:

- forward moves apply: ``open`` → ``paid``, ``void`` or ``uncollectible``; ``uncollectible`` → ``paid`` or
  ``void`` (Stripe's own lifecycle);
- a recorded payment is undone only by an **explicit reopen**: ``reopen`` (``import --reopen``), or a row
  saying ``open`` with a ``status_on`` after the payment date (a refund or chargeback the books date);
- anything else is **stale** and changes no status: a late or reordered webhook, an old export, a processor's
  automatic status (Stripe marking a paid invoice ``uncollectible`` because it never saw the local payment).
  ``void`` is final, and ``uncollectible`` → ``open`` needs ``reopen`` as well.

Example::

    with store.transaction() as tx:
        write_customers(tx, [Customer(email="ana@example.test", name="Ana")])  # locale and zone kept
        counts = write_invoices(tx, invoices, reopen=False, now=clock.now())
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, TypeVar

from ..store import Tx
from .model import DEFAULT_LOCALE, DEFAULT_TZ, Customer, Invoice
from .names import fold_name

__all__ = ["InvoiceWrites", "customer_params", "mark_paid", "move_status", "write_customers", "write_invoices"]

T = TypeVar("T")


def customer_params(customer: Customer) -> dict[str, Any]:
    """The ``upsert_customer`` parameters of ``customer`` under the merge rule (module docstring).

    ``name``/``locale``/``tz``/``country``/``tags``: the value to store over a known customer, None to keep it
    (``""`` locale is stored as ``en_US``, ``""`` zone, country or tags as none); ``new_*``: the values of a
    customer not stored yet; ``name_folded``/``new_name_folded``: the folds of ``name``/``new_name``
    (:func:`oncebeat.reminders.names.fold_name`), stored with the name for the search by name.
    """
    locale = None if customer.locale is None else customer.locale or DEFAULT_LOCALE
    name, new_name = customer.name or None, customer.name or customer.email
    return {"email": customer.email, "name": name, "locale": locale, "tz": customer.tz,
            "country": customer.country, "tags": customer.tags,
            "name_folded": None if name is None else fold_name(name), "new_name_folded": fold_name(new_name),
            "new_name": new_name, "new_locale": locale or DEFAULT_LOCALE,
            "new_tz": customer.tz or DEFAULT_TZ, "new_country": customer.country or "", "new_tags": customer.tags or ""}


def write_customers(tx: Tx, customers: Sequence[Customer]) -> None:
    """Insert or merge ``customers`` (one statement per customer, sent as a batch)."""
    if customers:
        tx.many("upsert_customer", [customer_params(c) for c in customers])


@dataclass(slots=True)
class InvoiceWrites:
    """What :func:`write_invoices` did: ``new`` invoices, ``updated`` known ones, ``moved`` statuses, ``stale``
    rows whose status the rule refused (``kept_paid`` of them left a paid invoice paid)."""

    new: int = 0
    updated: int = 0
    moved: int = 0
    stale: int = 0
    kept_paid: int = 0


def _status_params(number: str, status: str, paid_on: date | None, status_on: date | None, reopen: bool,
                   now: datetime) -> dict[str, Any]:
    return {"number": number, "status": status, "paid_on": paid_on if status == "paid" else None,
            "status_on": status_on, "reopen": reopen, "now": now}


def write_invoices(tx: Tx, invoices: Sequence[Invoice], *, reopen: bool, now: datetime,
                   source: str | None = None) -> InvoiceWrites:
    """Insert new invoices and update known ones; statuses move only under the transition rule.

    Their customers must be written first (:func:`write_customers`). ``reopen``: an explicit reopen (``--reopen``)
    lets each row's status win. ``source``: the source writing them (``csv``, ``api``, ``sql NAME``), which
    becomes each invoice's ``payment_source`` (the last writer's: the payment-freshness fence reads that source's
    watermark, :mod:`.capfence`); None keeps the stored one.

    Returns:
        :class:`InvoiceWrites` counts, read from the rows before and after (a concurrent writer may shift them;
        the statuses themselves are decided on the rows as written).
    """
    out = InvoiceWrites()
    if not invoices:
        return out
    numbers = [i.number for i in invoices]
    before = {r["number"]: r for r in tx.run("invoice_states", numbers=numbers)}
    invoices = _in_lock_order(invoices, lambda i: i.number, before)
    tx.many("upsert_invoice", [{"number": i.number, "customer_email": i.customer_email, "currency": i.currency,
                                "amount_due": i.amount_due, "issued_on": i.issued_on, "due_on": i.due_on,
                                "status": i.status, "paid_on": i.paid_on if i.status == "paid" else None,
                                "payment_url": i.payment_url or None,
                                "payment_url_given": int(i.payment_url is not None),
                                "pdf_path": i.pdf_path or None, "pdf_path_given": int(i.pdf_path is not None),
                                "payment_source": source, "now": now} for i in invoices])
    # Every row, the new ones too: an invoice another writer inserted meanwhile still gets the rule.
    tx.many("move_invoice_status", [_status_params(i.number, i.status, i.paid_on, i.status_on, reopen, now)
                                    for i in invoices])
    after = {r["number"]: r for r in tx.run("invoice_states", numbers=[n for n in numbers if n in before])}
    for i in invoices:
        old = before.get(i.number)
        if old is None:
            out.new += 1
            continue
        out.updated += 1
        now_status = after[i.number]["status"] if i.number in after else old["status"]
        if old["status"] != i.status and now_status == i.status:
            out.moved += 1
        elif now_status != i.status:
            out.stale += 1
            out.kept_paid += now_status == "paid"
    return out


def move_status(tx: Tx, number: str, status: str, *, paid_on: date | None = None, status_on: date | None = None,
                reopen: bool = False, now: datetime) -> bool:
    """Move invoice ``number`` to ``status`` if the transition rule allows it; True when it moved.

    ``paid_on`` (the payment date) is needed for ``paid``; ``status_on`` is the day the source set ``status``.
    False: unknown invoice, already in ``status``, or a stale move (module docstring).
    """
    before = tx.run("invoice_states", numbers=[number])
    if not before or before[0]["status"] == status:
        return False
    tx.run("move_invoice_status", **_status_params(number, status, paid_on, status_on, reopen, now))
    return bool(tx.run("invoice_states", numbers=[number])[0]["status"] == status)



def mark_paid(tx: Tx, payments: Sequence[tuple[str, date]], *, now: datetime) -> int:
    """Record payments ``(invoice number, paid_on)`` under the transition rule; returns how many invoices became
    paid (an open or uncollectible one; one already paid or void is left as it is)."""
    if not payments:
        return 0
    numbers = [n for n, _ in payments]
    known = {r["number"]: r for r in tx.run("invoice_states", numbers=numbers)}
    tx.many("move_invoice_status", [_status_params(n, "paid", day, day, False, now)
                                    for n, day in _in_lock_order(payments, lambda p: p[0], known)])
    after = {r["number"]: r["status"] for r in tx.run("invoice_states", numbers=numbers)}
    return sum(1 for n in set(numbers)
               if (known[n]["status"] if n in known else None) not in (None, "paid") and after.get(n) == "paid")


def _in_lock_order(rows: Sequence[T], number: Callable[[T], str], known: Mapping[str, Mapping[str, Any]]) -> list[T]:
    """``rows`` in invoice id order (rows of unknown invoices last, each in file order), so every writer of several
    invoices takes their row locks in one order (PostgreSQL): two imports over overlapping files, or an import
    beside an API batch, wait for each other instead of deadlocking (which PostgreSQL ends by aborting one)."""
    last = float("inf")
    return sorted(rows, key=lambda r: int(known[number(r)]["id"]) if number(r) in known else last)
