"""Tasks: per task, over the last hour or day, the jobs finished (a chart per task of completed and discarded per
slot), the failure rate, retries, and the run time of the completed jobs at p50, p95 and p99 (exact, nearest
rank: :meth:`oncebeat.queue.Queue.task_stats`). What Sidekiq Web's and Oban Web's metrics pages show, read from
the jobs table itself (no second store of metrics): it covers what retention has not pruned."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..queue import Queue
from .app import dashboard, render, route
from .charts import stacked_bars
from .schedules import operator_source

__all__ = ["WINDOWS", "routes", "run_time"]

#: window name -> (length, slot seconds, x label every n slots)
WINDOWS = {"hour": (timedelta(hours=1), 300, 2), "day": (timedelta(days=1), 3600, 4)}
SERIES = ("completed", "discarded")


def run_time(value: float | None) -> str:
    """Seconds as an operator reads a job's run time: ``0.4 ms``, ``12 ms``, ``1.52 s``, ``3 min 20 s``."""
    if value is None:
        return "–"
    if value == 0:
        return "0 ms"
    if value < 0.001:
        return f"{value * 1000:.2f} ms"
    if value < 1:
        return f"{value * 1000:.3g} ms"
    if value < 60:
        return f"{value:.3g} s"
    minutes, secs = divmod(int(round(value)), 60)
    return f"{minutes} min {secs} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _label(window: str, slot: int, slots: int, seconds: int) -> str:
    back = (slots - slot) * seconds
    return f"-{back // 60}m" if window == "hour" else f"-{back // 3600}h"


def tasks_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    window = request.query_params.get("window", "hour")
    if window not in WINDOWS:
        window = "hour"
    length, slot_seconds, every = WINDOWS[window]
    now = rt.clock.now()
    since = now - length
    q = Queue(rt.store, clock=rt.clock, source=operator_source())
    slots = int(length.total_seconds()) // slot_seconds
    per_task: dict[str, list[dict[str, float]]] = {}
    for r in q.task_histogram(since, slot_seconds):
        if 0 <= r["slot"] < slots and r["state"] in SERIES:
            per_task.setdefault(r["task"], [{} for _ in range(slots)])[r["slot"]][r["state"]] = float(r["n"])
    rows: list[dict[str, Any]] = []
    for s in q.task_stats(since):
        finished = s["completed"] + s["discarded"]
        columns = [(_label(window, i, slots, slot_seconds), v)
                   for i, v in enumerate(per_task.get(s["task"], [{} for _ in range(slots)]))]
        rows.append(s | {
            "failure_rate": s["discarded"] / finished if finished else None,
            "per_minute": (s["completed"] + s["discarded"] + s["cancelled"] + s["in_doubt"])
            / (length.total_seconds() / 60),
            "times": {k: run_time(s[k]) for k in ("p50", "p95", "p99", "max")},
            "chart": stacked_bars(columns, list(SERIES), width=420, height=110, label_every=every,
                                  title=f"{s['task']}: jobs finished per {slot_seconds // 60} minutes"),
        })
    known = sorted(set(rt.app.tasks) - {r["task"] for r in rows})
    return render(request, "tasks.html", {"title": "Tasks", "rows": rows, "idle": known, "window": window,
                                          "windows": list(WINDOWS), "since": since})


routes = [route("/tasks", tasks_page)]
