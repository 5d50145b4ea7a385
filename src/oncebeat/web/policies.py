"""Policies: the ladders of the policy file in matching order (rule, stages, collapse, spacing, sender) and, per
recorded version, how many invoices it holds (open ones are still in dunning on it), read through
:func:`oncebeat.reminders.pinning.holdings`, the same verb as ``oncebeat policies``. ``?ladder=NAME`` lists the
invoices pinned to one ladder.

The one action: ``POST /policies/{name}/apply`` (an admin session and the CSRF field; a viewer is refused) moves
the open invoices of a ladder to its newest settings, as ``oncebeat policies apply --ladder NAME --apply-to-open``
does (:func:`oncebeat.reminders.pinning.apply_to_open`, audited ``ladders.applied`` with the operator). The button
says what it moves ("2 open invoices move from v1 to v2") and posts that count: if it changed meanwhile nothing
moves and the page says so."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .app import action_form, dashboard, redirect_with, render, route
from .schedules import operator_source

__all__ = ["routes"]

INVOICE_LIMIT = 500


def policies_page(request: Request) -> Response:
    from ..reminders.ladder_calendars import describe_days
    from ..reminders.ladders import ladders_of  # here: a library app's dashboard never loads the reminder app
    from ..reminders.pinning import apply_plan, holdings, ladder_invoices

    rt = dashboard(request).runtime
    policy = rt.fresh_policy()  # the file as it is on disk, not as this process read it at start
    held = holdings(rt.store, policy)
    ladders = ladders_of(policy)
    names = [s.name for s, _ in ladders]
    rows: list[dict[str, Any]] = [{"settings": s, "rule": rule.describe() if rule else "everything else",
                                   "versions": [x for x in held if x.name == s.name],
                                   "days": describe_days(policy, s),
                                   "apply": apply_plan(rt.store, policy, s.name)} for s, rule in ladders]
    for row in rows:
        row["apply_text"] = _moves_text(row["apply"]) if row["apply"]["total"] else None
    chosen = request.query_params.get("ladder") or None
    if chosen is not None and chosen not in names and not any(x.name == chosen for x in held):
        raise HTTPException(404, f"no ladder {chosen[:60]!r}")
    pinned = ladder_invoices(rt.store, chosen, limit=INVOICE_LIMIT + 1) if chosen else []
    return render(request, "policies.html", {
        "title": "Policies", "ladders": rows, "removed": [x for x in held if x.name not in names],
        "chosen": chosen, "pinned": pinned[:INVOICE_LIMIT], "more": len(pinned) > INVOICE_LIMIT})


def _moves_text(plan: dict[str, Any]) -> str:
    """``2 open invoices move from v1 to v2`` (versions joined when several)."""
    froms = ", ".join(f"v{v}" for v in sorted(plan["moves"]))
    count = plan["total"]
    return f"{count} open invoice{'' if count == 1 else 's'} move from {froms} to v{plan['to_version']}"


async def apply_action(request: Request) -> Response:
    """An admin moves the open invoices of ladder ``name`` to its newest settings; ``expected`` is the count the
    button showed (another count moves nothing). CSRF and operator session checked; audited."""
    from ..reminders.pinning import apply_to_open

    form = await action_form(request)
    rt = dashboard(request).runtime
    name = request.path_params["name"]
    text = form.get("expected", "")
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise HTTPException(400, "expected: the count of open invoices the button showed is missing")
    policy = await run_in_threadpool(rt.fresh_policy)  # an edited file: the settings on disk, never stale ones
    done = await run_in_threadpool(lambda: apply_to_open(rt.store, policy, name, now=rt.clock.now(),
                                                         source=operator_source(), expected=int(text)))
    return redirect_with(request, f"ladder {name}: {done['moved']} open invoice(s) moved to version "
                                  f"{done['version']}; stages they already have stay", "/policies")


routes = [route("/policies", policies_page),
          route("/policies/{name}/apply", apply_action, methods=["POST"])]
