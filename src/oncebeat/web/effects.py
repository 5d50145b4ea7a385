"""Effects: the ones that need a decision (in doubt) with their evidence — holder, the SMTP reply or
what is known of it, the Message-ID — and the actions resolve done / not done."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..effects import EffectLedger
from ..errors import OncebeatError
from ..processes import processes_by_ids
from ..provenance import current_source
from .app import action_form, dashboard, redirect_with, render, route
from .schedules import operator_source, parse_instant

__all__ = ["routes"]

PAGE = 50
STATES = ("in_doubt", "started", "failed")  # done effects are listed on their job's page


def effects_page(request: Request) -> Response:
    rt = dashboard(request).runtime
    state = request.query_params.get("state") or "in_doubt"
    if state not in STATES:
        raise OncebeatError(f"state {state!r}: the effects page lists {', '.join(STATES)} (done effects are on "
                            "their job's page)")
    after = None
    after_at = parse_instant(request.query_params.get("after_at"), "UTC", "after_at")
    if after_at is not None:
        after = (after_at, request.query_params.get("after_key", ""))
    ledger = EffectLedger(rt.store, clock=rt.clock, source=current_source("api"))
    rows = ledger.list_page(state=state, after=after, limit=PAGE + 1)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    processes = processes_by_ids(rt.store, [r["process_id"] for r in rows if r["process_id"] is not None])
    return render(request, "effects.html", {
        "title": "Effects", "effects": rows, "state": state, "states": STATES, "processes": processes,
        "counts": ledger.counts_unfinished(),
        "next_after": {"after_at": rows[-1]["started_at"].isoformat(), "after_key": rows[-1]["key"],
                       "state": state} if more else None})


async def resolve(request: Request) -> Response:
    form = await action_form(request)
    key, outcome = form.get("key", ""), form.get("outcome", "")
    if outcome not in ("done", "not_done"):
        raise OncebeatError("outcome must be done (it happened) or not_done (it did not: one new attempt runs)")
    service = dashboard(request).runtime.service
    message = await run_in_threadpool(service.resolve_effect, key, outcome,
                                      source=operator_source())
    return redirect_with(request, message, "/effects")


routes = [route("/effects", effects_page), route("/effects/resolve", resolve, methods=["POST"])]
