"""The HTTP API's ladders, ``/api/v1/ladders``: the ladders of the policy file with their rules, versions and the
invoices each holds, and the apply of a ladder's newest settings to its open invoices.

- ``GET /api/v1/ladders``: every ladder (:func:`oncebeat.reminders.ladder_report.ladder_report`).
- ``GET /api/v1/ladders/{name}``: one ladder, with its pinned invoices (open first, at most
  :data:`INVOICE_LIMIT`; ``invoices_truncated`` says when there were more).
- ``POST /api/v1/ladders/{name}/apply``: ``oncebeat policies apply --ladder NAME --apply-to-open``
  (:func:`oncebeat.reminders.pinning.apply_to_open`): a write like every other (Idempotency-Key, one transaction
  with the key, the write scope, audited ``ladders.applied`` and ``api.write`` with the token's name). Optional
  body ``{"expected": N}``: the count of open invoices the caller saw move (``apply.total`` of the GET); another
  count answers 409 ``count_changed`` and moves nothing.

This module only parses and answers.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import ConfigError, OncebeatError
from ..provenance import Source
from ..reminders.sources.api import FieldProblem, RequestRejected
from ..store import Tx
from .api import API_V1, Refused, Write, json_response, keyed_write
from .api_auth import api_error
from .app import dashboard, route

__all__ = ["APPLY_FIELDS", "INVOICE_LIMIT", "routes"]

#: The fields of POST /api/v1/ladders/{name}/apply (all optional).
APPLY_FIELDS = ("expected",)
#: Pinned invoices listed by GET /api/v1/ladders/{name} at most.
INVOICE_LIMIT = 1000
_MAX_EXPECTED = 10**12


def _no_params(request: Request) -> Response | None:
    for name in request.query_params:
        return api_error(400, "invalid_query", f"query parameter {name[:40]}: unknown parameter; this route takes "
                                               "none", problems=[{"pointer": "", "field": name[:40],
                                                                  "message": "unknown parameter"}])
    return None


async def list_ladders(request: Request) -> Response:
    from ..reminders.ladder_report import ladder_report  # here: a library app never loads the reminder app

    if (refusal := _no_params(request)) is not None:
        return refusal
    rt = dashboard(request).runtime
    try:
        policy = await run_in_threadpool(rt.fresh_policy)
    except ConfigError as exc:
        return _invalid_file(exc)
    ladders = await run_in_threadpool(ladder_report, rt.store, policy)
    return json_response({"ladders": ladders})


async def get_ladder(request: Request) -> Response:
    from ..reminders.ladder_report import ladder_report
    from ..reminders.pinning import ladder_invoices

    if (refusal := _no_params(request)) is not None:
        return refusal
    rt = dashboard(request).runtime
    name = request.path_params["name"]
    try:
        policy = await run_in_threadpool(rt.fresh_policy)
    except ConfigError as exc:
        return _invalid_file(exc)
    found = await run_in_threadpool(ladder_report, rt.store, policy, name)
    if not found:
        return api_error(404, "not_found", f"no ladder {name[:60]!r}; GET {API_V1}/ladders lists them")
    pinned = await run_in_threadpool(lambda: ladder_invoices(rt.store, name, limit=INVOICE_LIMIT + 1))
    invoices = [{"number": r["number"], "status": r["status"], "due_on": r["due_on"], "version": int(r["version"])}
                for r in pinned[:INVOICE_LIMIT]]
    return json_response({"ladder": found[0] | {"invoices": invoices,
                                                "invoices_truncated": len(pinned) > INVOICE_LIMIT}})


def _invalid_file(exc: ConfigError) -> Response:
    return api_error(409, "policy_file_invalid", f"the policy file changed and cannot be read: {exc}; fix it first")


def _expected(body: Any) -> int | None:
    if body is None:
        return None
    if not isinstance(body, dict):
        raise RequestRejected([FieldProblem(pointer="", message='the body must be a JSON object such as '
                                                                '{"expected": 12}, or empty')])
    problems = [FieldProblem(pointer=f"/{k}", message=f"unknown field; the fields are {', '.join(APPLY_FIELDS)}")
                for k in body if k not in APPLY_FIELDS]
    value = body.get("expected")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 0 <= value <= _MAX_EXPECTED):
        problems.append(FieldProblem(pointer="/expected", message="must be a whole number of open invoices (0 or "
                                                                  "more): apply.total of GET /api/v1/ladders/{name}"))
    if problems:
        raise RequestRejected(problems)
    return value


async def apply_ladder(request: Request) -> Response:
    from ..reminders.pinning import ApplyCountChanged, apply_plan, apply_to_open

    rt = dashboard(request).runtime
    name = request.path_params["name"]

    def prepare(body: Any) -> Write:
        expected = _expected(body)
        try:
            policy = rt.fresh_policy()  # the file as it is on disk: never a stale copy recorded as the newest
        except ConfigError as exc:
            raise Refused(_invalid_file(exc)) from None
        try:
            apply_plan(rt.store, policy, name)  # only to refuse an unknown ladder before the write
        except OncebeatError as exc:
            raise Refused(api_error(404, "not_found", str(exc))) from None

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            try:
                done = apply_to_open(rt.store, policy, name, now=rt.clock.now(), source=source,
                                     expected=expected, tx=tx)
            except ApplyCountChanged as exc:
                return 409, {"error": {"type": "count_changed", "message": str(exc), "expected": exc.expected,
                                       "actual": exc.actual}}
            return 200, {"ladder": name, "version": done["version"], "moved": done["moved"],
                         "from_versions": {str(k): v for k, v in sorted(done["from_versions"].items())}}
        return write

    return await keyed_write(request, prepare, body_required=False)


routes = [
    route(f"{API_V1}/ladders", list_ladders, methods=["GET"], name="api_ladders"),
    route(f"{API_V1}/ladders/{{name}}", get_ladder, methods=["GET"], name="api_ladder"),
    route(f"{API_V1}/ladders/{{name}}/apply", apply_ladder, methods=["POST"], name="api_ladder_apply"),
]
