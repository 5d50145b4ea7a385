"""The book copied out of the live database for a what-if (issue 23 item 6), and a run's outcome read back.

:func:`copy_book` streams customers, ladder versions, invoices (with their pins), holds and reminders out of the
live store (SQLite or PostgreSQL; read-only named queries, one keyset page of ``batch`` rows at a time, so a book
of any size never sits in memory) into a freshly migrated SQLite store, keeping every id, so the copy answers
every reminder query as the live database would: an invoice already in dunning keeps the ladder version it is
pinned to (a ladder edit changes it only when applied to open invoices, as live). The live database is never
written: each page is a plain ``SELECT`` (on SQLite a read outside any write transaction, so it neither waits for
nor blocks the live workers).

The copy is the book **as of** ``start`` (a date in the schedule's zone): an invoice the live book records paid on
``start`` or later is copied open, and its payment is returned to be applied on its day by the simulation (so a
what-if never reminds someone who is known to pay on day 3). Nothing else is invented: the what-if assumes no new
invoices and no payments beyond those the book already holds.

:func:`iter_outcomes` reads back what a simulated run decided (every reminder row touched at or after the run's
start), grouped per invoice in id order, again page by page: two runs are compared by walking both at once.

Example::

    copied = copy_book(live, copy, start=date(2026, 1, 25), before=t0)
    for invoice_id, rows in iter_outcomes(copy, t0=...):
        ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from ..errors import OncebeatError
from ..store import Store
from .model import Payment
from .names import fold_name

__all__ = ["BookCopy", "copy_book", "iter_outcomes"]

#: Rows per page, read and written; bounds the copy's memory whatever the book's size.
DEFAULT_BATCH = 2000


@dataclass(kw_only=True, slots=True)
class BookCopy:
    """What :func:`copy_book` copied: row counts, the payments to apply during the run (``paid_on`` on or after
    the start, by date then number), and the latest business date of a reminder already recorded (None: none)."""

    customers: int = 0
    ladder_versions: int = 0
    invoices: int = 0
    pinned: int = 0  # invoices copied with their pin (open ones stay on that ladder version in the runs)
    holds: int = 0
    reminders: int = 0
    payments: list[Payment] = field(default_factory=list)
    latest_reminder_on: date | None = None
    zones: set[str] = field(default_factory=set)  # the customers' zones ("" = the schedule's)


def _pages(page: Callable[[int], list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    """Keyset pages: ``page(after_id)`` returns the next rows by id; stops at the first empty page."""
    after = 0
    while True:
        rows = page(after)
        if not rows:
            return
        yield rows
        after = int(rows[-1]["id"])


def copy_book(source: Store, target: Store, *, start: date, before: datetime, batch: int = DEFAULT_BATCH
              ) -> BookCopy:
    """Copy the book of ``source`` (read only) into ``target`` (a migrated, empty SQLite store) as of ``start``.

    Args:
        source: the live store; only read-only queries run on it.
        target: the copy; written one transaction per page.
        start: the first simulated business date: an invoice paid on it or later is copied ``open`` (``paid_on``
            and ``paid_at`` cleared) and its payment returned in :attr:`BookCopy.payments`.
        batch: rows per page.

    Raises:
        OncebeatError: ``target`` already holds invoices (a copy is made into an empty database only).
        StoreError: either database failed (the live one is left as it was: it was only read).
    """
    if target.read("whatif_invoices_page", after_id=0, limit=1):
        raise OncebeatError("the what-if copy must start empty")
    done = BookCopy()
    for rows in _pages(lambda after: source.read("whatif_customers_page", after_id=after, limit=batch)):
        with target.transaction() as tx:
            tx.many("whatif_copy_customer", [{**r, "name_folded": fold_name(r["name"])} for r in rows])
        done.zones |= {str(r["tz"] or "") for r in rows}
        done.customers += len(rows)
    for rows in _pages(lambda after: source.read("whatif_ladder_versions_page", after_id=after, limit=batch)):
        with target.transaction() as tx:
            tx.many("whatif_copy_ladder_version", rows)
        done.ladder_versions += len(rows)
    for rows in _pages(lambda after: source.read("whatif_invoices_page", after_id=after, limit=batch)):
        done.pinned += sum(1 for r in rows if r["ladder_version_id"] is not None)
        for r in rows:
            if r["status"] == "paid" and r["paid_on"] is not None and r["paid_on"] >= start:
                done.payments.append(Payment(number=r["number"], paid_on=r["paid_on"]))
                r.update(status="open", paid_on=None, paid_at=None)
        pinned = [{"id": r["id"], "ladder_version_id": r["ladder_version_id"]} for r in rows
                  if r["ladder_version_id"] is not None]
        with target.transaction() as tx:
            tx.many("whatif_copy_invoice", rows)
            if pinned:
                tx.many("whatif_copy_pin", pinned)
        done.invoices += len(rows)
    for rows in _pages(lambda after: source.read("whatif_holds_page", after_id=after, limit=batch)):
        with target.transaction() as tx:
            tx.many("whatif_copy_hold", rows)
        done.holds += len(rows)
    for rows in _pages(lambda after: source.read("whatif_reminders_page", after_id=after, limit=batch)):
        edge = before - timedelta(microseconds=1)
        for r in rows:
            r["created_at"], r["updated_at"] = min(r["created_at"], edge), min(r["updated_at"], edge)
        latest = max(r["business_date"] for r in rows)
        if done.latest_reminder_on is None or latest > done.latest_reminder_on:
            done.latest_reminder_on = latest
        with target.transaction() as tx:
            tx.many("whatif_copy_reminder", rows)
        done.reminders += len(rows)
    done.payments.sort(key=lambda p: (p.paid_on, p.number))
    return done


def iter_outcomes(store: Store, *, t0: datetime, batch: int = DEFAULT_BATCH
                  ) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """``(invoice_id, rows)`` in invoice id order: the reminders of that invoice a run decided (``updated_at`` at
    or after ``t0``, an aware instant), stage order. Each row: ``invoice_id, stage, state, reason, business_date,
    sent_at`` (UTC, None unless sent), ``superseded_stages``, ``number, customer_id, email, tz, locale`` and
    ``in_dunning`` (the invoice had a reminder before ``t0``). Read ``batch`` rows at a time."""
    after_invoice, after_stage = 0, -(10**9)
    current: int | None = None
    group: list[dict[str, Any]] = []
    while True:
        rows = store.read("whatif_outcomes_page", t0=t0, after_invoice=after_invoice, after_stage=after_stage,
                          limit=batch)
        for r in rows:
            if r["invoice_id"] != current:
                if current is not None:
                    yield current, group
                current, group = int(r["invoice_id"]), []
            group.append(r)
        if len(rows) < batch:
            break
        after_invoice, after_stage = int(rows[-1]["invoice_id"]), int(rows[-1]["stage"])
    if current is not None:
        yield current, group
