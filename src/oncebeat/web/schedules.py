"""Schedules: definitions, next fires (local and UTC, DST marked), the occurrence ledger as a timeline,
and the actions pause, resume, trigger and backfill (with a preview of what it would enqueue)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..clock import ClockProcess
from ..errors import OncebeatError
from ..provenance import current_source
from ..schedules_report import backfill_preview, describe_schedules, occurrence_timeline
from .app import action_form, dashboard, redirect_with, render, route

__all__ = ["parse_instant", "routes"]

TIMELINE_PAGE = 50
SCHEDULES_PAGE = 100
SOURCE_NAME = "oncebeat web"  # provenance of dashboard actions: who pressed the button is "an operator on the web"


def _describe(request: Request, key: str) -> dict[str, object]:
    rt = dashboard(request).runtime
    for s in describe_schedules(rt.app, rt.store, now=rt.clock.now(), count=5, keys=[key]):
        return s
    raise HTTPException(404, f"no schedule {key!r}")


def parse_instant(text: str | None, tz: str, what: str) -> datetime | None:
    """An ISO instant with offset, or a local date-time (``2026-03-08T08:00``) read in zone ``tz``.

    Raises:
        OncebeatError: not a date-time (the message names the field and shows the expected form).
    """
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise OncebeatError(f"{what}: {text!r} is not a date-time such as 2026-03-08T08:00 "
                            f"(read in {tz}) or 2026-03-08T08:00:00-06:00") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=ZoneInfo(tz))


def schedules_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    rows = describe_schedules(rt.app, rt.store, now=rt.clock.now(), count=3,
                              after=request.query_params.get("after") or None, limit=SCHEDULES_PAGE + 1)
    more = len(rows) > SCHEDULES_PAGE
    rows = rows[:SCHEDULES_PAGE]
    return render(request, "schedules.html", {"title": "Schedules", "schedules": rows,
                                              "next_after": rows[-1]["key"] if more else None})


def schedule_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    key = request.path_params["key"]
    s = _describe(request, key)
    before = parse_instant(request.query_params.get("before"), "UTC", "before")
    timeline = occurrence_timeline(rt.store, key, before=before, limit=TIMELINE_PAGE + 1)
    more = len(timeline) > TIMELINE_PAGE
    timeline = timeline[:TIMELINE_PAGE]
    preview = None
    start = parse_instant(request.query_params.get("from"), str(s["tz"]), "from")
    end = parse_instant(request.query_params.get("until"), str(s["tz"]), "until")
    if start is not None and end is not None:
        preview = backfill_preview(rt.store, key, start, end, now=rt.clock.now())
    return render(request, "schedule.html", {
        "title": f"Schedule {key}", "s": s, "timeline": timeline,
        "next_before": timeline[-1]["fire_at"].isoformat() if more else None,
        "preview": preview, "range": {"from": request.query_params.get("from", ""),
                                      "until": request.query_params.get("until", "")},
        "range_utc": (start, end),
    })


def _clock(request: Request) -> ClockProcess:
    rt = dashboard(request).runtime
    return ClockProcess(rt.app, rt.store, clock=rt.clock, source=current_source("manual", name=SOURCE_NAME))


async def set_state(request: Request) -> Response:
    await action_form(request)
    key = request.path_params["key"]
    state = "paused" if request.url.path.endswith("/pause") else "active"
    changed = await run_in_threadpool(_clock(request).set_state, key, state)
    word = "paused" if state == "paused" else "resumed"
    message = f"{key}: {word}" if changed else f"{key}: no change (unknown, retired, or already {word})"
    return redirect_with(request, message, f"/schedules/{key}")


async def trigger(request: Request) -> Response:
    await action_form(request)
    key = request.path_params["key"]
    fire = await run_in_threadpool(_clock(request).trigger, key, kind="manual")
    return redirect_with(request, f"triggered {fire.describe()}", f"/schedules/{key}")


async def backfill(request: Request) -> Response:
    form = await action_form(request)
    key = request.path_params["key"]
    s = await run_in_threadpool(_describe, request, key)
    start = parse_instant(form.get("from"), str(s["tz"]), "from")
    end = parse_instant(form.get("until"), str(s["tz"]), "until")
    if start is None or end is None:
        raise OncebeatError("backfill needs both ends of the range (from, until)")
    fires = await run_in_threadpool(_clock(request).backfill, key, start, end)
    done = sum(1 for f in fires if f.inserted)
    return redirect_with(request, f"{key}: {done} occurrence(s) backfilled, {len(fires) - done} already in the ledger",
                         f"/schedules/{key}")


routes = [
    route("/schedules", schedules_page),
    route("/schedules/{key}", schedule_page),
    route("/schedules/{key}/pause", set_state, methods=["POST"], name="pause"),
    route("/schedules/{key}/resume", set_state, methods=["POST"], name="resume"),
    route("/schedules/{key}/trigger", trigger, methods=["POST"]),
    route("/schedules/{key}/backfill", backfill, methods=["POST"]),
]
