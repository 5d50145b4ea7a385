"""Whole-table reads of the reminder app, for checks over a whole run (the simulator's checker, the demo).

The reminder app owns its SQL line (``reminders/sql/``); a module outside the app reads its tables only
through verbs like these. Each takes a :class:`~oncebeat.store.Store` (one transaction of its own) or an
open :class:`~oncebeat.store.Tx`.
"""

from __future__ import annotations

from typing import Any

from ..store import Store, Tx

__all__ = ["all_invoices", "all_notices", "all_reminders", "pending_reminders"]


def all_invoices(db: Store | Tx) -> list[dict[str, Any]]:
    """Every invoice with its customer (``email, name, locale, customer_tz``), by id."""
    return db.read("list_invoices")


def all_reminders(db: Store | Tx) -> list[dict[str, Any]]:
    """Every reminder with its invoice's ``number, due_on, invoice_status, paid_on``, by id.

    One row per reminder as stored: the stages a row records superseded are in its ``superseded_stages``
    (:func:`~oncebeat.reminders.model.with_superseded` lists them as skipped reminders of their own)."""
    return db.read("list_reminders")


def pending_reminders(db: Store | Tx) -> list[dict[str, Any]]:
    """The reminders still ``pending``: ``id, stage, number`` (the invoice's), by id."""
    return db.read("pending_reminders")


def all_notices(db: Store | Tx) -> list[dict[str, Any]]:
    """Every grouped notice (``group = "customer"``, reminders 0017) once per row it lists, by notice: ``notice_id,
    customer_id, business_date, ladder_version_id, notice_state, notice_message_id, frozen_at`` (UTC or None) and
    the row's ``reminder_id, stage, state, message_id`` and invoice ``number`` (None for a notice listing none)."""
    return db.read("notices_all")
