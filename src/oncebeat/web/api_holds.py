"""The HTTP API's holds, ``/api/v1/holds``: place a hold (dispute, promise to pay until a date, manual) on an
invoice or a customer, release holds, list them.

The verbs are :mod:`oncebeat.reminders.holds`' own (the CLI's ``oncebeat hold``/``release``/``holds`` and the
dashboard call the same functions), so a hold placed here is audited, covers the same business dates and resumes
the ladder the same way. Writes go through :func:`oncebeat.web.api.keyed_write` (Idempotency-Key, one
transaction with the key); a problem is named by its JSON pointer (422) and nothing is applied. This module only
parses and answers.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..provenance import Source
from ..reminders.holds import HoldError, get_hold, hold_placed_with, list_holds, place_hold, release_holds
from ..reminders.model import HOLD_REASONS
from ..reminders.sources.api import FieldProblem, RequestRejected
from ..store import Tx
from .api import API_V1, Write, json_response, keyed_write
from .api_auth import api_error
from .app import MAX_ID_DIGITS, dashboard, route

__all__ = ["HOLD_FIELDS", "RELEASE_FIELDS", "routes"]

#: The fields of POST /api/v1/holds.
HOLD_FIELDS = ("invoice_number", "customer_email", "reason", "until", "note", "external_ref")
#: The fields of POST /api/v1/holds/release: exactly one selector, and a note.
RELEASE_FIELDS = ("hold_id", "invoice_number", "customer_email", "external_ref", "note")
_TEXT_LIMITS = {"invoice_number": 64, "customer_email": 320, "note": 1000, "external_ref": 255}


def _fields(body: Any, allowed: tuple[str, ...], example: str) -> tuple[dict[str, Any], list[FieldProblem]]:
    """The body's fields as given, and a problem per unknown field or badly typed text (pointer ``/name``)."""
    if not isinstance(body, dict):
        raise RequestRejected([FieldProblem(pointer="", message=f"the body must be a JSON object such as {example}")])
    problems: list[FieldProblem] = []
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name not in allowed:
            problems.append(FieldProblem(pointer=f"/{name}", message=f"unknown field; the fields are "
                                                                     f"{', '.join(allowed)}"))
        elif name == "hold_id":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 10 ** MAX_ID_DIGITS:
                problems.append(FieldProblem(pointer="/hold_id", message="must be a hold id (a positive whole "
                                                                         "number; GET /api/v1/holds lists them)"))
            else:
                out[name] = value
        elif value is None:
            continue
        elif not isinstance(value, str) or not value.strip() or len(value) > _TEXT_LIMITS.get(name, 40) \
                or not value.isprintable():
            problems.append(FieldProblem(pointer=f"/{name}", message=f"must be printable text of 1 to "
                                                                     f"{_TEXT_LIMITS.get(name, 40)} characters"))
        else:
            out[name] = value.strip()
    return out, problems


def _read_hold(body: Any) -> dict[str, Any]:
    """The checked fields of a hold to place; raises RequestRejected naming every bad field."""
    out, problems = _fields(body, HOLD_FIELDS, '{"invoice_number": "INV-1001", "reason": "dispute"}')
    if ("invoice_number" in out) == ("customer_email" in out) and not any(
            p.pointer in ("/invoice_number", "/customer_email") for p in problems):
        problems.append(FieldProblem(pointer="", message="give exactly one of invoice_number (hold one invoice) "
                                                         "or customer_email (hold every invoice of a customer)"))
    reason = out.get("reason")
    if reason is None and not any(p.pointer == "/reason" for p in problems):
        problems.append(FieldProblem(pointer="/reason", message=f"required: one of {', '.join(HOLD_REASONS)}"))
    elif reason is not None and reason not in HOLD_REASONS:
        problems.append(FieldProblem(pointer="/reason", message=f"{reason[:40]!r} is not one of "
                                                                f"{', '.join(HOLD_REASONS)}"))
    if "until" in out:
        try:
            out["until"] = date.fromisoformat(out["until"])
        except ValueError:
            problems.append(FieldProblem(pointer="/until", message=f"{out['until'][:40]!r} is not a date: write "
                                                                   "YYYY-MM-DD (the last day of the promise)"))
    if problems:
        raise RequestRejected(problems)
    return out


def _refused(exc: HoldError, pointer: str) -> RequestRejected:
    return RequestRejected([FieldProblem(pointer=pointer, message=str(exc))])


def _pointer_of(exc: HoldError, fields: dict[str, Any]) -> str:
    """The field a HoldError is about, by what the request gave (the verbs name the flag, not the field)."""
    text = str(exc)
    if "--until" in text or "promise" in text:
        return "/until"
    for name in ("invoice_number", "customer_email", "hold_id", "external_ref"):
        if name in fields:
            return f"/{name}"
    return ""


async def place(request: Request) -> Response:
    rt = dashboard(request).runtime

    def prepare(body: Any) -> Write:
        fields = _read_hold(body)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            try:
                hold = place_hold(rt.store, clock=rt.clock, zone=rt.policy.zone, calendar=rt.policy.calendar,
                                  source=source,
                                  reason=fields["reason"], invoice=fields.get("invoice_number"),
                                  customer=fields.get("customer_email"), until=fields.get("until"),
                                  note=fields.get("note"), external_ref=fields.get("external_ref"), tx=tx)
            except HoldError as exc:
                raise _refused(exc, _pointer_of(exc, fields)) from None
            if hold is None:  # external_ref already placed one: answer with it, place nothing
                found = hold_placed_with(tx, fields["external_ref"])
                return 200, {"hold": found.as_dict() if found else None, "placed": False}
            return 201, {"hold": hold.as_dict(), "placed": True}
        return write

    return await keyed_write(request, prepare)


async def release(request: Request) -> Response:
    rt = dashboard(request).runtime

    def prepare(body: Any) -> Write:
        fields, problems = _fields(body, RELEASE_FIELDS, '{"invoice_number": "INV-1001"}')
        selectors = [n for n in RELEASE_FIELDS if n != "note" and n in fields]
        if len(selectors) != 1 and not problems:
            problems.append(FieldProblem(pointer="", message="give exactly one of hold_id, invoice_number, "
                                                             "customer_email or external_ref"))
        if problems:
            raise RequestRejected(problems)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            try:
                released = release_holds(rt.store, clock=rt.clock, zone=rt.policy.zone,
                                         calendar=rt.policy.calendar, source=source,
                                         hold_id=fields.get("hold_id"), invoice=fields.get("invoice_number"),
                                         customer=fields.get("customer_email"),
                                         external_ref=fields.get("external_ref"), note=fields.get("note"), tx=tx)
            except HoldError as exc:
                raise _refused(exc, _pointer_of(exc, fields)) from None
            return 200, {"released": [h.as_dict() for h in released]}
        return write

    return await keyed_write(request, prepare)


async def list_all(request: Request) -> Response:
    rt = dashboard(request).runtime
    for name in request.query_params:
        if name not in ("active_on",):
            return api_error(400, "invalid_query", f"query parameter {name[:40]}: unknown parameter; use active_on",
                             problems=[{"pointer": "", "field": name[:40], "message": "unknown parameter"}])
    text = request.query_params.get("active_on")
    day: date | None = None
    if text is not None:
        try:
            day = rt.clock.now().astimezone(rt.policy.zone).date() if text == "today" else date.fromisoformat(text)
        except ValueError:
            return api_error(400, "invalid_query", f"query parameter active_on: {text[:20]!r} is not a date "
                                                   "(YYYY-MM-DD or today)",
                             problems=[{"pointer": "", "field": "active_on", "message": "not a date"}])
    holds = await run_in_threadpool(list_holds, rt.store, active_on=day)
    return json_response({"holds": [h.as_dict() for h in holds]})


async def get_one(request: Request) -> Response:
    rt = dashboard(request).runtime
    hold = await run_in_threadpool(get_hold, rt.store, request.path_params["id"])
    if hold is None:
        return api_error(404, "not_found", f"no hold {request.path_params['id']}; GET {API_V1}/holds lists them")
    return json_response({"hold": hold.as_dict()})


routes = [
    route(f"{API_V1}/holds", list_all, methods=["GET"], name="api_holds"),
    route(f"{API_V1}/holds", place, methods=["POST"], name="api_hold_place"),
    route(f"{API_V1}/holds/release", release, methods=["POST"], name="api_hold_release"),
    route(f"{API_V1}/holds/{{id:id}}", get_one, methods=["GET"], name="api_hold"),
]
