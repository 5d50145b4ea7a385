"""The process registry (``processes`` table): who is running, where, and since when.

Read verbs for operators: the dashboard, ``/metrics`` and the doctor list processes through here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .store import Store

__all__ = ["database_now", "list_processes"]


def list_processes(store: Store, *, running: bool = False) -> list[dict[str, Any]]:
    """Registered processes, oldest first, as rows (``id, role, host, pid, name, version, tz_env, info,
    started_at, heartbeat_at, stopped_at``; instants aware UTC).

    Args:
        running: only processes that have not recorded a stop (alive, or died without stopping).
    """
    return store.read("list_running_processes" if running else "list_processes")


def database_now(store: Store) -> datetime:
    """The database server's clock (PostgreSQL ``now()``; SQLite: this host's clock), aware UTC.

    Compared with a process's clock it gives the skew that ``time_source = database`` avoids.
    """
    return store.read("doctor_db_now")[0]["db_now"].astimezone(UTC)  # type: ignore[no-any-return]
