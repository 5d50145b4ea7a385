"""Queues: one row per queue with its depth (due now), scheduled jobs, running, held, latency (the oldest due job's
age) and throughput (finished in the last hour), paused state with since when and by whom, the concurrency limit
over every worker (:mod:`oncebeat.queue_limits`, set or lifted here), and the admin actions pause and resume
(the engine's :func:`oncebeat.pauses.pause_queue` / :func:`~oncebeat.pauses.resume_queue`, audited with the
operator as ``oncebeat queues pause`` is). Below, **Busy**: what each worker runs now (job, task, queue,
started, attempt), from the running jobs' leases and their processes' heartbeats."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import audit
from ..pauses import check_queue_name, pause_queue, queue_overview, resume_queue
from ..provenance import Operator
from ..queue import Queue
from ..queue_limits import MAX_LIMIT, clear_queue_limit, queue_limits, set_queue_limit
from .app import action_form, dashboard, redirect_with, render, route
from .overview import ALIVE_AFTER
from .schedules import operator_source

__all__ = ["THROUGHPUT_WINDOW", "queue_rows", "routes"]

THROUGHPUT_WINDOW = timedelta(hours=1)
BUSY_LIMIT = 200


def _paused_by(rt: Any, queue: str, row: Any) -> str:
    """Who paused ``queue``: the operator of its newest ``queue.paused`` event, else the pause's provenance."""
    for event in audit.events_of(rt.store, f"queue:{queue}", limit=20):
        if event["kind"] == "queue.paused":
            operator = Operator.from_detail((event.get("detail") or {}).get("operator"))
            where = f"{event['source_name']} on {event['source_host']}"
            return f"{operator} ({where})" if operator else where
    return str(row.paused_by or "unknown")


def queue_rows(rt: Any, now: datetime) -> list[dict[str, Any]]:
    q = Queue(rt.store, clock=rt.clock, source=operator_source())
    known = tuple(sorted({t.queue for t in rt.app.tasks.values()}))
    depths = {d["queue"]: d for d in q.depths()}
    limits = queue_limits(rt.store)
    finished: dict[str, dict[str, int]] = {}
    for r in q.finished_by_queue(now - THROUGHPUT_WINDOW):
        finished.setdefault(r["queue"], {})[r["state"]] = r["n"]
    rows = []
    for s in queue_overview(rt.store, known=known):
        d = depths.get(s.queue, {"due": 0, "later": 0, "oldest_due_at": None})
        done = finished.get(s.queue, {})
        oldest = d["oldest_due_at"]
        rows.append({"queue": s.queue, "paused": s.paused, "paused_at": s.paused_at,
                     "paused_by": _paused_by(rt, s.queue, s) if s.paused else None,
                     "available": d["due"], "scheduled": d["later"], "running": s.running, "held": s.held,
                     "held_by": s.held_by, "latency": (now - oldest).total_seconds() if oldest else None,
                     "completed": done.get("completed", 0), "discarded": done.get("discarded", 0),
                     "cancelled": done.get("cancelled", 0),
                     "limit": int(limits[s.queue]["max_running"]) if s.queue in limits else None})
    return rows


def _busy(rt: Any, now: datetime) -> list[dict[str, Any]]:
    rows = Queue(rt.store, clock=rt.clock, source=operator_source()).running(limit=BUSY_LIMIT + 1)
    for r in rows:
        beat = r["heartbeat_at"]
        r["alive"] = beat is not None and r["stopped_at"] is None and now - beat <= ALIVE_AFTER
    return rows


def queues_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    now = rt.clock.now()
    busy = _busy(rt, now)
    return render(request, "queues.html", {"title": "Queues", "queues": queue_rows(rt, now), "busy": busy[:BUSY_LIMIT],
                                           "busy_more": len(busy) > BUSY_LIMIT, "window": THROUGHPUT_WINDOW})


async def set_queue_state(request: Request) -> Response:
    await action_form(request)
    name = check_queue_name(request.path_params["queue"])
    pause = request.url.path.endswith("/pause")
    rt = dashboard(request).runtime
    verb = pause_queue if pause else resume_queue
    changed = await run_in_threadpool(lambda: verb(rt.store, name, source=operator_source(), clock=rt.clock))
    if not changed:
        message = f"queue {name}: no change (already {'paused' if pause else 'active'})"
    elif pause:
        message = f"queue {name}: paused; no worker claims its jobs until it is resumed (jobs already running finish)"
    else:
        message = f"queue {name}: resumed; its held jobs are claimable again, each runs once"
    return redirect_with(request, message, "/queues")


async def set_queue_limit_form(request: Request) -> Response:
    form = await action_form(request)
    name = check_queue_name(request.path_params["queue"])
    rt = dashboard(request).runtime
    text = (form.get("max_running") or "").strip()
    if not text:
        before = await run_in_threadpool(lambda: clear_queue_limit(rt.store, name, source=operator_source(),
                                                                   clock=rt.clock))
        message = (f"queue {name}: no limit any more (it was {before} at once)" if before is not None
                   else f"queue {name}: no change (it has no limit)")
        return redirect_with(request, message, "/queues")
    if not (text.isascii() and text.isdigit()) or len(text) > 6 or not 1 <= int(text) <= MAX_LIMIT:
        return redirect_with(request, f"queue {name}: {text[:20]!r} is not a limit; give a whole number of jobs "
                                      f"from 1 to {MAX_LIMIT}, or leave it empty for no limit", "/queues")
    limit = int(text)
    before = await run_in_threadpool(lambda: set_queue_limit(rt.store, name, limit, source=operator_source(),
                                                             clock=rt.clock))
    if before == limit:
        return redirect_with(request, f"queue {name}: no change (already at most {limit} at once)", "/queues")
    return redirect_with(request, f"queue {name}: at most {limit} job(s) running at once over every worker "
                                  f"(was {'no limit' if before is None else before}); running jobs finish", "/queues")


routes = [
    route("/queues", queues_page),
    route("/queues/{queue:path}/pause", set_queue_state, methods=["POST"], name="queue_pause"),
    route("/queues/{queue:path}/resume", set_queue_state, methods=["POST"], name="queue_resume"),
    route("/queues/{queue:path}/limit", set_queue_limit_form, methods=["POST"], name="queue_limit"),
]
