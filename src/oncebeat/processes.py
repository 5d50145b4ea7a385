"""The process registry (``processes`` table): who is running, where, and since when.

The one owner of the registry's SQL: clocks and workers register, heartbeat and stop through
:func:`register`, :func:`heartbeat` and :func:`stop`; the dashboard, ``/metrics`` and the doctor
list processes through :func:`list_processes`.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from . import audit, dbtime
from .provenance import Source
from .store import Json, Store
from .timebase import Clock

__all__ = ["database_now", "heartbeat", "list_processes", "processes_by_ids", "register", "stop"]


def register(store: Store, *, role: str, source: Source, clock: Clock, info: dict[str, Any] | None = None) -> int:
    """Insert this process into the registry (audited ``process.started``); return its id.

    The id is the ``worker_id`` on the jobs a worker claims and the ``process_id`` on audit events.
    ``role`` is ``clock`` or ``worker``; ``info`` is free JSON shown by the doctor and dashboard.
    """
    now = clock.now()
    with store.transaction() as tx:
        row = tx.one("register_process", role=role, host=source.host, pid=source.pid, name=source.name,
                     version=source.version, tz_env=os.environ.get("TZ"), info=Json(info or {}), now=now)
        if row is None:  # INSERT … RETURNING always returns the row; a driver that does not is a bug
            raise RuntimeError("register_process returned no id")
        process_id = int(row["id"])
        audit.record(tx, now=now, kind="process.started", subject=f"process:{process_id}", source=source,
                     process_id=process_id, detail={"role": role, **(info or {})})
    return process_id


def heartbeat(store: Store, process_id: int, now: datetime) -> None:
    """Record that ``process_id`` is alive at ``now`` (aware UTC); the doctor reads it to tell live from dead.

    One idempotent statement (:meth:`Store.run_idempotent`: run twice, it writes the same instant): on PostgreSQL
    one round trip in autocommit instead of ``BEGIN``, ``UPDATE``, ``COMMIT``, run again on the next pooled
    connection when the one it used was found dead. Every clock tick and worker batch beats (issue 27: a third of
    a simulation's transactions were heartbeats).
    """
    store.run_idempotent("heartbeat_process", id=process_id, now=now)


def stop(store: Store, process_id: int, *, source: Source, now: datetime, detail: dict[str, Any] | None = None) -> None:
    """Record a clean stop of ``process_id`` at ``now`` (audited ``process.stopped`` with ``detail``)."""
    with store.transaction() as tx:
        tx.run("stop_process", id=process_id, now=now)
        audit.record(tx, now=now, kind="process.stopped", subject=f"process:{process_id}", source=source,
                     process_id=process_id, detail=detail or {})


def processes_by_ids(store: Store, ids: list[int]) -> dict[int, dict[str, Any]]:
    """The registry rows of ``ids`` (e.g. the holders of some effects), by id; unknown ids are left out."""
    wanted = sorted({int(i) for i in ids})
    return {int(p["id"]): p for p in store.read("processes_by_ids", ids=wanted)} if wanted else {}


def list_processes(store: Store, *, running: bool = False) -> list[dict[str, Any]]:
    """Registered processes, oldest first, as rows (``id, role, host, pid, name, version, tz_env, info,
    started_at, heartbeat_at, stopped_at``; instants aware UTC).

    Args:
        running: only processes that have not recorded a stop (alive, or died without stopping).
    """
    return store.read("list_running_processes" if running else "list_processes")


def database_now(store: Store) -> datetime:
    """The database server's clock (:func:`oncebeat.dbtime.database_now`; SQLite: this host's clock), aware UTC.

    Compared with a process's clock it gives the skew that ``time_source = database`` avoids.
    """
    return dbtime.database_now(store)
