"""Overview: jobs per state and queue, throughput, processes alive, effects in doubt, doctor summary, clocks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..effects import EffectLedger
from ..processes import list_processes
from ..provenance import current_source
from ..queue import UNFINISHED_STATES, Queue
from .app import dashboard, render, route

__all__ = ["routes"]

ALIVE_AFTER = timedelta(minutes=2)  # a process whose heartbeat is older than this is shown as silent


def overview(request: Request) -> Response:
    rt = dashboard(request).runtime
    now = rt.clock.now()
    source = current_source("api")
    queue = Queue(rt.store, clock=rt.clock, source=source)
    processes = list_processes(rt.store, running=True)
    for p in processes:
        p["alive"] = now - p["heartbeat_at"] <= ALIVE_AFTER
    return render(request, "overview.html", {
        "title": "Overview",
        "by_queue": _by_queue(queue.counts_by_queue()),
        "states": UNFINISHED_STATES,
        "processes": processes,
        "effects": EffectLedger(rt.store, clock=rt.clock, source=source).counts_unfinished(),
    })


def _by_queue(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        out.setdefault(r["queue"], {})[r["state"]] = r["n"]
    return out


routes = [route("/", overview)]
