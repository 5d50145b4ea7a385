"""Policies: the ladders of the policy file in matching order (rule, stages, collapse, spacing, sender) and, per
recorded version, how many invoices it holds (open ones are still in dunning on it), read through
:func:`oncebeat.reminders.pinning.holdings`, the same verb as ``oncebeat policies``. ``?ladder=NAME`` lists the
invoices pinned to one ladder. Read-only: moving open invoices to a new version is ``oncebeat policies apply
--ladder NAME --apply-to-open`` (audited)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .app import dashboard, render, route

__all__ = ["routes"]

INVOICE_LIMIT = 500


def policies_page(request: Request) -> Response:
    from ..reminders.ladders import ladders_of  # here: a library app's dashboard never loads the reminder app
    from ..reminders.pinning import holdings, ladder_invoices

    rt = dashboard(request).runtime
    held = holdings(rt.store, rt.policy)
    ladders = ladders_of(rt.policy)
    names = [s.name for s, _ in ladders]
    rows: list[dict[str, Any]] = [{"settings": s, "rule": rule.describe() if rule else "everything else",
                                   "versions": [x for x in held if x.name == s.name]} for s, rule in ladders]
    chosen = request.query_params.get("ladder") or None
    if chosen is not None and chosen not in names and not any(x.name == chosen for x in held):
        raise HTTPException(404, f"no ladder {chosen[:60]!r}")
    pinned = ladder_invoices(rt.store, chosen, limit=INVOICE_LIMIT + 1) if chosen else []
    return render(request, "policies.html", {
        "title": "Policies", "ladders": rows, "removed": [x for x in held if x.name not in names],
        "chosen": chosen, "pinned": pinned[:INVOICE_LIMIT], "more": len(pinned) > INVOICE_LIMIT})


routes = [route("/policies", policies_page)]
