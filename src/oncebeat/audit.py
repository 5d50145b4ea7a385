"""The append-only audit trail: events a person (or the doctor) must be able to read.

Events are written in the same transaction as the change they describe.
Routine lifecycle (claimed, completed) lives in the job row itself; events
record what needs explaining: schedule sync, occurrences and rejected
duplicates, catch-up decisions, retries, rescues, discards, cancels, effect
outcomes, manual triggers, process start/stop.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .provenance import Source
from .store import Json, Store, Tx

__all__ = ["events_of", "record"]


def record(tx: Tx, *, now: datetime, kind: str, subject: str, source: Source,
           detail: dict[str, Any] | None = None, process_id: int | None = None) -> None:
    """Append one event.

    Args:
        kind: dotted event name, e.g. ``occurrence.duplicate_rejected``, ``job.rescued``.
        subject: what it is about, e.g. ``schedule:reminders``, ``job:42``, ``effect:reminder:7``.
        detail: JSON-serialisable facts (ids, instants as ISO text, errors).
    """
    tx.run("insert_event", now=now, kind=kind, subject=subject, process_id=process_id,
           detail=Json(detail or {}), **source.params())


def events_of(store: Store, subject: str, *, limit: int = 200) -> list[dict[str, Any]]:
    """The newest ``limit`` events about ``subject`` (e.g. ``job:42``), newest first."""
    return store.read("events_of_subject", subject=subject, limit=limit)
