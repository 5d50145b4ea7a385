"""The schedule rows and the occurrence ledger: the reads (and two small writes) several modules need.

The clock writes schedules and occurrences (``clock.sql``), schedule admin edits them (``schedule_admin.sql``);
what the clock, schedule admin, reports, the worker, the doctor, the simulator and the demo all read goes
through the verbs here, which own ``store/sql/common/ledger.sql`` (one owner per query; see README,
Development). Each verb takes a :class:`~oncebeat.store.Store` (one transaction of its own) or an open
:class:`~oncebeat.store.Tx` (inside the caller's transaction). Rows are dicts of the tables' columns with
Python values (instants aware UTC, ``business_date`` a ``date``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .store import Store, Tx

__all__ = ["list_schedules", "schedule_versions", "get_schedule", "last_fire_at", "set_schedule_state",
           "get_occurrence", "occurrence_at", "list_occurrences", "set_occurrence_job"]

Db = Store | Tx


def _first(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return rows[0] if rows else None


def list_schedules(db: Db, *, keys: list[str] | None = None) -> list[dict[str, Any]]:
    """Every schedule row (every state: active, paused, retired), ordered by key; only ``keys``' rows if given."""
    if keys is None:
        return db.read("list_schedules")
    return db.read("list_schedules_by_key", keys=keys) if keys else []


def schedule_versions(db: Db) -> list[dict[str, Any]]:
    """``{"key", "version", "state"}`` of every schedule: what changed since a re-read, without reading all rows.

    Every change of a schedule's definition raises its version; a pause, resume or retirement changes its state.
    """
    return db.read("schedule_versions")


def get_schedule(db: Db, key: str) -> dict[str, Any] | None:
    """The schedule row of ``key``, or None.

    Inside a transaction on PostgreSQL the row is locked ``FOR SHARE`` until it ends: a fire decided from it
    cannot interleave with a concurrent retire, pause or change.
    """
    return _first(db.read("get_schedule", key=key))


def last_fire_at(db: Db, key: str) -> datetime | None:
    """The newest scheduled instant (UTC) recorded for ``key``, manual runs left out; None if none."""
    row = _first(db.read("last_fire_at", key=key))
    return row["last_fire_at"] if row else None


def set_schedule_state(tx: Tx, key: str, state: str, now: datetime) -> bool:
    """Set ``key``'s state (``active``, ``paused``, ``retired``); resuming restarts ``active_since`` at ``now``.

    Returns False when the row is missing or already in that state.
    """
    return tx.one("set_schedule_state", key=key, state=state, now=now) is not None


def get_occurrence(db: Db, occurrence_id: int) -> dict[str, Any] | None:
    """The occurrence row ``occurrence_id``, or None."""
    return _first(db.read("get_occurrence", id=occurrence_id))


def occurrence_at(db: Db, key: str, fire_at: datetime) -> dict[str, Any] | None:
    """The occurrence of schedule ``key`` at instant ``fire_at`` (aware), or None."""
    return _first(db.read("get_occurrence_by_instant", schedule_key=key, fire_at=fire_at))


def list_occurrences(db: Db, key: str | None = None) -> list[dict[str, Any]]:
    """The occurrences of ``key`` (None: of every schedule), oldest ``fire_at`` first."""
    return db.read("list_occurrences", schedule_key=key)


def set_occurrence_job(tx: Tx, occurrence_id: int, job_id: int | None) -> None:
    """Link occurrence ``occurrence_id`` to the job that runs it; the job then serves the occurrence (for a
    make-up run, the one first re-run): at most one unfinished run per occurrence.

    Raises:
        UniqueConflict: (constraint ``jobs_one_run_per_occurrence``) another run of that occurrence is unfinished
            (on PostgreSQL the transaction is aborted; :func:`oncebeat.queue.unfinished_run` names it).
    """
    tx.run("set_occurrence_job", id=occurrence_id, job_id=job_id)
    if job_id is not None:
        tx.run("job_runs_occurrence", id=occurrence_id, job_id=job_id)
