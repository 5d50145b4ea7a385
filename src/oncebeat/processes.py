"""The process registry (``processes`` table): who is running, where, and since when.

Read verbs for operators: the dashboard, ``/metrics`` and the doctor list processes through here.
"""

from __future__ import annotations

from typing import Any

from .store import Store

__all__ = ["list_processes"]


def list_processes(store: Store, *, running: bool = False) -> list[dict[str, Any]]:
    """Registered processes, oldest first, as rows (``id, role, host, pid, name, version, tz_env, info,
    started_at, heartbeat_at, stopped_at``; instants aware UTC).

    Args:
        running: only processes that have not recorded a stop (alive, or died without stopping).
    """
    return store.read("list_running_processes" if running else "list_processes")
