"""Schedules: definitions, next fires (local and UTC, DST marked), the occurrence ledger as a timeline,
and the actions pause, resume, trigger, backfill (with a preview of what it would enqueue), run-time
edits of the definition (``set``), retire, and re-running an occurrence. Every action calls a verb of
:mod:`oncebeat.clock` or :mod:`oncebeat.schedule_admin`; this module only parses the form."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..app import CATCHUP_POLICIES, OVERLAP_POLICIES
from ..durations import parse_duration
from ..errors import OncebeatError
from ..pauses import held_jobs
from ..provenance import Source, current_source, dashboard_operator
from ..schedule_admin import (
    backfill_schedule,
    pause_schedule,
    rerun_occurrence,
    resume_schedule,
    retire_schedule,
    revert_schedule,
    set_schedule,
    trigger_schedule,
)
from ..schedules import DST_FOLD_OPTIONS, DST_GAP_OPTIONS
from ..schedules_report import backfill_preview, describe_schedules, occurrence_timeline
from .app import action_form, dashboard, redirect_with, render, route

__all__ = ["parse_instant", "operator_source", "routes"]

TIMELINE_PAGE = 50
SCHEDULES_PAGE = 100
# Instants a form or filter may name: a day inside Python's datetime range on both sides, so converting to any
# zone or stepping a microsecond never overflows.
INSTANT_MIN = datetime(1900, 1, 1, tzinfo=UTC)
INSTANT_MAX = datetime(9998, 12, 31, tzinfo=UTC)
SOURCE_NAME = "oncebeat web"  # provenance of dashboard actions: who pressed the button is "an operator on the web"


def _describe(request: Request, key: str) -> dict[str, object]:
    rt = dashboard(request).runtime
    for s in describe_schedules(rt.app, rt.store, now=rt.clock.now(), count=5, keys=[key]):
        return s
    raise HTTPException(404, f"no schedule {key!r}")


def parse_instant(text: str | None, tz: str, what: str) -> datetime | None:
    """An ISO instant with offset, or a local date-time (``2026-03-08T08:00``) read in zone ``tz``.

    Raises:
        OncebeatError: not a date-time (the message names the field and shows the expected form), or
            outside :data:`INSTANT_MIN` … :data:`INSTANT_MAX` (at the ends of Python's range a zone
            conversion or a microsecond step overflows).
    """
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise OncebeatError(f"{what}: {text[:60]!r} is not a date-time such as 2026-03-08T08:00 "
                            f"(read in {tz}) or 2026-03-08T08:00:00-06:00") from exc
    value = value if value.tzinfo is not None else value.replace(tzinfo=ZoneInfo(tz))
    try:
        in_range = INSTANT_MIN <= value <= INSTANT_MAX
    except OverflowError:  # 0001-01-01T00:00+14:00 is before datetime's first instant in UTC
        in_range = False
    if not in_range:
        raise OncebeatError(f"{what}: {text[:60]!r} is outside the supported range {INSTANT_MIN.date()} to "
                            f"{INSTANT_MAX.date()} (UTC)")
    return value


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
    held = held_jobs(rt.store, schedule_key=key)  # its queued runs a pause holds (its own or its queue's)
    return render(request, "schedule.html", {
        "title": f"Schedule {key}", "s": s, "timeline": timeline, "held": held,
        "options": {"dst_gap": DST_GAP_OPTIONS, "dst_fold": DST_FOLD_OPTIONS, "catchup": CATCHUP_POLICIES,
                    "overlap": OVERLAP_POLICIES},
        "next_before": timeline[-1]["fire_at"].isoformat() if more else None,
        "preview": preview, "range": {"from": request.query_params.get("from", ""),
                                      "until": request.query_params.get("until", "")},
        "range_utc": (start, end),
    })


def _page(key: str) -> str:
    """The schedule's page (a key may hold ``/``, which the routes' ``{key:path}`` accepts, or any character)."""
    return "/schedules/" + quote(key, safe="/")


def _admin(request: Request, verb: Callable[..., Any], key: str, *args: Any) -> Any:
    """Run a schedule_admin verb for ``key`` as the dashboard's operator (:func:`operator_source`)."""
    rt = dashboard(request).runtime
    return verb(rt.store, rt.app, key, *args, source=operator_source(), clock=rt.clock)


async def set_state(request: Request) -> Response:
    await action_form(request)
    key = request.path_params["key"]
    state = "paused" if request.url.path.endswith("/pause") else "active"
    changed = await run_in_threadpool(_admin, request, pause_schedule if state == "paused" else resume_schedule, key)
    word = "paused" if state == "paused" else "resumed"
    message = f"{key}: {word}" if changed else f"{key}: no change (already {word})"
    return redirect_with(request, message, _page(key))


async def trigger(request: Request) -> Response:
    await action_form(request)
    key = request.path_params["key"]
    fire = await run_in_threadpool(_admin, request, trigger_schedule, key)
    return redirect_with(request, f"triggered {fire.describe()}", _page(key))


async def backfill(request: Request) -> Response:
    form = await action_form(request)
    key = request.path_params["key"]
    s = await run_in_threadpool(_describe, request, key)
    start = parse_instant(form.get("from"), str(s["tz"]), "from")
    end = parse_instant(form.get("until"), str(s["tz"]), "until")
    if start is None or end is None:
        raise OncebeatError("backfill needs both ends of the range (from, until)")
    fires = await run_in_threadpool(_admin, request, backfill_schedule, key, start, end)
    done = sum(1 for f in fires if f.inserted)
    return redirect_with(request, f"{key}: {done} occurrence(s) backfilled, {len(fires) - done} already in the ledger",
                         _page(key))


def operator_source() -> Source:
    """Provenance of a dashboard action: kind ``manual``, process ``oncebeat web``, operator ``dashboard`` (its
    user is the operator session: one token opens it), kept in the audit trail for the doctor."""
    return current_source("manual", name=SOURCE_NAME, operator=dashboard_operator())



def _seconds(text: str | None, what: str) -> float | None:
    """A duration in words (``24h``, ``90m``, ``1h30m``, ``2d``) or seconds (``86400``); None when empty."""
    if not text or not text.strip():
        return None
    try:
        return parse_duration(text.strip()[:40])
    except ValueError as exc:
        raise OncebeatError(f"{what}: {text[:40]!r} is not a duration; write it as 24h, 90m, 1h30m, 2d or a "
                            "number of seconds such as 86400") from exc


async def set_definition(request: Request) -> Response:
    form = await action_form(request)
    key = request.path_params["key"]
    rt = dashboard(request).runtime
    fields = {name: (form.get(name) or "").strip() or None
              for name in ("expression", "tz", "dst_gap", "dst_fold", "catchup", "overlap")}
    edit = await run_in_threadpool(lambda: set_schedule(
        rt.store, key, **fields, catchup_window=_seconds(form.get("catchup_window"), "catch-up window"),
        source=operator_source(), clock=rt.clock))
    if not edit["changed"]:
        return redirect_with(request, f"{key}: no change", _page(key))
    changed = ", ".join(f"{name} {edit['old'][name]} → {edit['new'][name]}" for name in edit["new"]
                        if edit["new"][name] != edit["old"][name])
    return redirect_with(request, f"{key}: version {edit['version']} ({changed}); every clock picks it up at its "
                         "next re-read, and it overrides the code until a deploy changes the code's definition",
                         _page(key))


async def revert(request: Request) -> Response:
    await action_form(request)
    key = request.path_params["key"]
    rt = dashboard(request).runtime
    edit = await run_in_threadpool(lambda: revert_schedule(rt.store, rt.app, key, source=operator_source(),
                                                           clock=rt.clock))
    if not edit["changed"]:
        return redirect_with(request, f"{key}: no change (no run-time edit)", _page(key))
    return redirect_with(request, f"{key}: version {edit['version']}, back to the code's {edit['new']['expression']} "
                                  f"in {edit['new']['tz']}; every clock picks it up at its next re-read", _page(key))


async def retire(request: Request) -> Response:
    await action_form(request)
    key = request.path_params["key"]
    rt = dashboard(request).runtime
    retired = await run_in_threadpool(lambda: retire_schedule(rt.store, key, source=operator_source(), clock=rt.clock))
    return redirect_with(request, f"{key}: retired; it never fires again" if retired else f"{key}: already retired",
                         _page(key))


async def rerun(request: Request) -> Response:
    await action_form(request)
    rt = dashboard(request).runtime
    occurrence_id = int(request.path_params["id"])
    fire = await run_in_threadpool(lambda: rerun_occurrence(rt.store, occurrence_id, source=operator_source(),
                                                            clock=rt.clock, app=rt.app))
    return redirect_with(request, f"re-run of occurrence {occurrence_id}: {fire.describe()}",
                         f"/schedules/{fire.schedule_key}")


routes = [
    route("/schedules", schedules_page),
    route("/schedules/{key:path}", schedule_page),
    route("/schedules/{key:path}/pause", set_state, methods=["POST"], name="pause"),
    route("/schedules/{key:path}/resume", set_state, methods=["POST"], name="resume"),
    route("/schedules/{key:path}/trigger", trigger, methods=["POST"]),
    route("/schedules/{key:path}/backfill", backfill, methods=["POST"]),
    route("/schedules/{key:path}/set", set_definition, methods=["POST"]),
    route("/schedules/{key:path}/revert", revert, methods=["POST"]),
    route("/schedules/{key:path}/retire", retire, methods=["POST"]),
    route("/occurrences/{id:id}/rerun", rerun, methods=["POST"]),
]
