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

__all__ = ["events_of", "list_events", "prune", "record", "record_many"]


def record(tx: Tx, *, now: datetime, kind: str, subject: str, source: Source,
           detail: dict[str, Any] | None = None, process_id: int | None = None) -> None:
    """Append one event.

    Args:
        kind: dotted event name, e.g. ``occurrence.duplicate_rejected``, ``job.rescued``.
        subject: what it is about, e.g. ``schedule:reminders``, ``job:42``, ``effect:reminder:7``.
        detail: JSON-serialisable facts (ids, instants as ISO text, errors); a source with an operator (a person
            acting through the CLI or the dashboard) adds ``operator`` to it.
    """
    tx.run("insert_event", now=now, kind=kind, subject=subject, process_id=process_id,
           detail=Json(_with_operator(detail or {}, source)), **source.params())


def record_many(tx: Tx, *, now: datetime, source: Source, events: list[tuple[str, str, dict[str, Any]]],
                process_id: int | None = None) -> None:
    """Append many events of one process at ``now`` with one statement: ``events`` holds (kind, subject, detail)."""
    if events:
        tx.run("insert_events", now=now, process_id=process_id,
               rows=Json([[kind, subject, _with_operator(detail, source)] for kind, subject, detail in events]),
               **source.params())


def _with_operator(detail: dict[str, Any], source: Source) -> dict[str, Any]:
    return {**detail, "operator": source.operator.detail()} if source.operator is not None else detail


def events_of(store: Store, subject: str, *, limit: int = 200) -> list[dict[str, Any]]:
    """The newest ``limit`` events about ``subject`` (e.g. ``job:42``), newest first."""
    return store.read("events_of_subject", subject=subject, limit=limit)


def prune(tx: Tx, *, before: datetime) -> int:
    """Delete the events recorded before ``before`` (aware) in ``tx``; return how many were deleted.

    The caller records what it pruned (an ``audit.pruned`` event) in the same transaction.
    """
    row = tx.one("count_events_before", before=before)
    tx.run("prune_events", before=before)
    return int(row["n"]) if row else 0


def list_events(store: Store, *, since: datetime, subject: str | None = None,
                kind: str | None = None) -> list[dict[str, Any]]:
    """Events recorded at or after ``since`` (aware), oldest first, optionally of one ``subject`` and/or ``kind``.

    Rows: ``id, at, kind, subject, process_id, source_kind, source_host, source_pid, source_name,
    source_version, detail`` (``detail`` decoded JSON).
    """
    return store.read("list_events", subject=subject, kind=kind, since=since)
