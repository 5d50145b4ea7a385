"""Schedule listing for people: definitions, ledger state and the next fire times (local and UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .app import App
from .store import Store

__all__ = ["describe_schedules"]


def describe_schedules(app: App, store: Store, *, now: datetime, count: int = 3) -> list[dict[str, Any]]:
    """One dict per schedule (from the code/config and the database): key, expression, tz, task, state,
    last fire, and the next ``count`` fire instants as ``{"local": ISO, "utc": ISO}``."""
    rows = {r["key"]: r for r in store.read("list_schedules")}
    last = {r["schedule_key"]: r["last_fire_at"] for r in store.read("last_fires")}
    out = []
    for key in sorted(set(rows) | set(app.schedules)):
        d = app.schedules.get(key)
        row = rows.get(key)
        state = row["state"] if row else "not synced yet"
        if d is None and row is not None:
            from .app import ScheduleDef

            d = ScheduleDef.from_row(row)
        assert d is not None
        sched = d.schedule()
        t = now
        upcoming = []
        if state not in ("retired",):
            for _ in range(count):
                t = sched.next_after(t)
                upcoming.append({"local": sched.local(t).isoformat(), "utc": t.astimezone(UTC).isoformat()})
        lf = last.get(key)
        out.append({"key": key, "expression": d.expression, "tz": d.tz, "task": d.task, "state": state,
                    "catchup": d.catchup, "last_fire_utc": lf.isoformat() if lf else None,
                    "last_fire_local": sched.local(lf).isoformat() if lf else None, "next": upcoming})
    return out
