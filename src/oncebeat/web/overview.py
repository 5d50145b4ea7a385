"""Overview: jobs per state and queue, throughput and failures of the last hour (a chart), processes alive,
effects in doubt, the doctor's summary by severity with its age, the time source and the database clock's skew.
Each of these is a live region (refreshed by htmx from ``/?part=…`` until the operator pauses it); the doctor card's
refresh starts a background doctor run when its report is older than :data:`oncebeat.web.doctor.REFRESH_SECONDS`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..effects import EffectLedger
from ..processes import database_now, list_processes
from ..provenance import current_source
from ..queue import UNFINISHED_STATES, Queue
from .app import dashboard, render, route
from .charts import stacked_bars
from .doctor import doctor_runs

__all__ = ["routes"]

ALIVE_AFTER = timedelta(minutes=2)  # a process whose heartbeat is older than this is shown as silent
SLOT_SECONDS = 300  # the throughput chart: 12 slots of 5 minutes
FINAL_STATES = ("completed", "discarded", "cancelled")
#: The overview counts unfinished jobs up to this many per queue and state, and shows more as "10,000+": the page
#: reads a bounded number of rows whatever the backlog (docs/benchmarks.md, round 3b).
COUNT_CAP = 10_000


def _throughput(queue: Queue, now: Any) -> Any:
    since = now - timedelta(hours=1)
    slots: list[dict[str, float]] = [{} for _ in range(3600 // SLOT_SECONDS)]
    for r in queue.finished_histogram(since, SLOT_SECONDS):
        if 0 <= r["slot"] < len(slots):
            slots[r["slot"]][r["state"]] = float(r["n"])
    columns = [(f"-{60 - i * SLOT_SECONDS // 60}m" if i else "-60m", v) for i, v in enumerate(slots)]
    totals = {s: int(sum(v.get(s, 0) for v in slots)) for s in FINAL_STATES}
    return stacked_bars(columns, list(FINAL_STATES), width=520, height=150, label_every=2,
                        title="jobs finished per 5 minutes, last hour"), totals


def overview(request: Request) -> Response:
    d = dashboard(request)
    rt = d.runtime
    now = rt.clock.now()
    source = current_source("api")
    queue = Queue(rt.store, clock=rt.clock, source=source)
    processes = list_processes(rt.store, running=True)
    for p in processes:
        p["alive"] = now - p["heartbeat_at"] <= ALIVE_AFTER
    chart, totals = _throughput(queue, now)
    rows = queue.counts_by_queue_capped(COUNT_CAP)
    by_queue = _by_queue(rows)
    capped = {r["state"] for r in rows if r["capped"]}
    return render(request, "overview.html", {
        "title": "Overview", "by_queue": by_queue, "states": UNFINISHED_STATES,
        "totals": {s: _count_text(sum(min(r["n"], COUNT_CAP) for r in rows if r["state"] == s), s in capped)
                   for s in UNFINISHED_STATES},
        "processes": processes, "chart": chart, "finished": totals,
        "effects": EffectLedger(rt.store, clock=rt.clock, source=source).counts_unfinished(),
        # The doctor card's own refresh (live, ?part=doctor) starts a background run when the report is missing or
        # stale (one at a time); a page load never does (the doctor competes with rendering for this process's CPU).
        "doctor": doctor_runs(d, start=request.query_params.get("part") == "doctor"),
        "skew": (now - database_now(rt.store)).total_seconds(),
    })


def _count_text(n: int, capped: bool) -> str:
    """``12,345``, or ``10,000+`` for a count that reached the cap (a lower bound, as Oban and Sidekiq show)."""
    return f"{n:,}+" if capped else str(n)


def _by_queue(rows: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """``{queue: {state: count text}}`` from :meth:`Queue.counts_by_queue_capped` rows."""
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        out.setdefault(r["queue"], {})[r["state"]] = _count_text(min(r["n"], COUNT_CAP), r["capped"])
    return out


routes = [route("/", overview)]
