"""What became of a reminder that has not ended: the one definition of *lost* and *delayed* that ``check`` and
``doctor`` share (issue 21 item 4: they counted lost reminders differently on one database).

A reminder ``pending`` in the database is:

- **lost** when nothing will send it: it has no unfinished send job (``available``, ``scheduled``, ``running``
  or ``retryable``). Only the next scan re-enqueues one. ``doctor`` reports these under ``lost`` (error),
  ``check`` counts them in ``lost`` (an invariant violation);
- **delayed** when its send job is unfinished: waiting out a mail outage (``deferred_since`` set: the server
  refuses sessions; reminders migration 0006), or queued or retrying. It goes out by itself. ``check``
  reports it as delayed (exit status 4), never as a violation; ``doctor`` warns about one pending longer than
  an hour, or (``undelivered``) waiting out an outage longer than an hour.

A reminder ``deferred`` by the per-customer cap (reminders 0013, :mod:`.capfence`) is not final either: with an
unfinished (snoozed) send job it is **delayed** (``capped``: it goes out on the next allowed day by itself),
without one it is **lost** by the same rule.

:func:`duplicate_copies` is the shared count of duplicate deliveries: the copies of a reminder's message beyond
the first, by the invoice and stage its headers name (``X-Oncebeat-Invoice``, ``X-Oncebeat-Stage``), and of any
other message by Message-ID.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..doctor.facts import header
from ..mail.maildir import StoredMessage
from ..store import Store, Tx

__all__ = ["PendingFates", "pending_fates", "fate_of", "reminder_label", "duplicate_copies"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PendingFates:
    """The pending reminders (rows of ``doctor_pending_reminders``: the reminder, its invoice ``number`` and
    ``open_job_id``), by fate, oldest first."""

    lost: list[dict[str, Any]]
    outage: list[dict[str, Any]]  # delayed: waiting out a mail outage
    queued: list[dict[str, Any]]  # delayed: send job queued, running or retrying
    capped: list[dict[str, Any]] = field(default_factory=list)  # delayed: deferred by the cap, job snoozed

    @property
    def delayed(self) -> list[dict[str, Any]]:
        return self.outage + self.queued + self.capped

    def by_id(self) -> dict[int, tuple[str, dict[str, Any]]]:
        """reminder id -> (``lost``, ``outage``, ``queued`` or ``capped``; its row)."""
        return {int(r["id"]): (fate, r) for fate, rows in (("lost", self.lost), ("outage", self.outage),
                                                           ("queued", self.queued), ("capped", self.capped))
                for r in rows}


def fate_of(row: Mapping[str, Any]) -> str:
    """``lost``, ``outage``, ``queued`` or ``capped`` for one pending (or deferred) reminder row carrying
    ``open_job_id``, ``state`` and ``deferred_since``."""
    if row["open_job_id"] is None:
        return "lost"
    if row.get("state") == "deferred":
        return "capped"
    return "outage" if row.get("deferred_since") is not None else "queued"


def pending_fates(db: Store | Tx, rows: Iterable[Mapping[str, Any]] | None = None) -> PendingFates:
    """The pending reminders of ``db`` (or the given rows of ``doctor_pending_reminders``) sorted by fate."""
    found: dict[str, list[dict[str, Any]]] = {"lost": [], "outage": [], "queued": [], "capped": []}
    for r in rows if rows is not None else db.read("doctor_pending_reminders"):
        found[fate_of(r)].append(dict(r))
    return PendingFates(lost=found["lost"], outage=found["outage"], queued=found["queued"], capped=found["capped"])


def reminder_label(msg: StoredMessage) -> str | None:
    """``invoice N stage S`` for a reminder's message (its ``X-Oncebeat-Invoice`` and ``-Stage`` headers), else
    None: the name under which the doctor's ``duplicate-delivery`` and ``check`` group copies of one reminder."""
    invoice, stage = header(msg, "X-Oncebeat-Invoice"), header(msg, "X-Oncebeat-Stage")
    return f"invoice {invoice} stage {stage}" if invoice and stage else None


def duplicate_copies(messages: Iterable[StoredMessage]) -> dict[str, int]:
    """Copies delivered more than once: label -> copies beyond the first (a message delivered 3 times counts 2).

    A reminder's copies are grouped by :func:`reminder_label`, whatever their Message-IDs; a message without
    those headers by its Message-ID (``Message-ID <…>``), as the doctor's ``duplicate-delivery`` groups them.
    """
    groups: dict[str, list[StoredMessage]] = defaultdict(list)
    for m in messages:
        groups[reminder_label(m) or f"Message-ID {m.message_id}"].append(m)
    return {label: len(ms) - 1 for label, ms in groups.items() if len(ms) > 1}
