"""The HTTP API's reads, ``/api/v1``: reminders (filtered, keyset pages), an invoice with its history, schedules,
a job, and the OpenAPI document. Any token (read or write scope) may read. Pages are bounded
(:data:`MAX_PAGE`); ``next`` is the cursor of the following page (``after=…``), null on the last one."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import OncebeatError
from ..provenance import current_source
from ..queue import Queue
from ..reminders.model import REMINDER_STATES
from ..schedule_admin import describe_schedule
from ..schedules_report import describe_schedules
from .api import API_V1, json_response
from .api_auth import api_error
from .app import MAX_ID_DIGITS, dashboard, route
from .openapi import document

__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "routes"]

DEFAULT_PAGE = 100
MAX_PAGE = 500
_PARAMS = {"reminders": ("invoice", "customer", "state", "after", "limit"), "schedules": ("after", "limit")}


class _BadQuery(Exception):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


def _bad(exc: _BadQuery) -> Response:
    return api_error(400, "invalid_query", f"query parameter {exc.name}: {exc.message}",
                     problems=[{"pointer": "", "field": exc.name, "message": exc.message}])


def _check_names(request: Request, which: str) -> None:
    for name in request.query_params:
        if name not in _PARAMS[which]:
            raise _BadQuery(name, f"unknown parameter; use {', '.join(_PARAMS[which])}")


def _limit(request: Request) -> int:
    text = request.query_params.get("limit")
    if text is None:
        return DEFAULT_PAGE
    if not (text.isascii() and text.isdigit()) or len(text) > 4 or not 1 <= int(text) <= MAX_PAGE:
        raise _BadQuery("limit", f"{text[:20]!r} is not a whole number from 1 to {MAX_PAGE}")
    return int(text)


def _after_id(request: Request) -> int:
    text = request.query_params.get("after")
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_ID_DIGITS:
        raise _BadQuery("after", f"{text[:20]!r} is not a cursor: pass the previous page's next value")
    return int(text)


async def list_reminders(request: Request) -> Response:
    service = dashboard(request).runtime.service
    q = request.query_params
    try:
        _check_names(request, "reminders")
        limit, after = _limit(request), _after_id(request)
        state = q.get("state") or None
        if state is not None and state not in REMINDER_STATES:
            raise _BadQuery("state", f"{state[:40]!r} is not a reminder state; use one of {', '.join(REMINDER_STATES)}")
        for name, longest in (("invoice", 64), ("customer", 254)):
            if len(q.get(name) or "") > longest:
                raise _BadQuery(name, f"is longer than {longest} characters")
    except _BadQuery as exc:
        return _bad(exc)
    rows = await run_in_threadpool(lambda: service.reminders_page(
        number=q.get("invoice") or None, email=q.get("customer") or None, state=state, after_id=after,
        limit=limit + 1))
    more = len(rows) > limit
    rows = rows[:limit]
    return json_response({"reminders": rows, "next": str(rows[-1]["id"]) if more else None})


async def get_invoice(request: Request) -> Response:
    service = dashboard(request).runtime.service
    number = request.path_params["number"]
    story = await run_in_threadpool(service.invoice_story, number)
    if story is None:
        return api_error(404, "not_found", f"no invoice {number[:64]!r}")
    invoice = dict(story["invoice"])
    customer = {"email": invoice.pop("email"), "name": invoice.pop("name"), "locale": invoice.pop("locale"),
                "tz": invoice.pop("customer_tz"), "country": invoice.pop("customer_country", ""),
                "tags": invoice.pop("customer_tags", "")}  # as written: "enterprise;vip"
    return json_response({"invoice": invoice, "customer": customer, "reminders": story["reminders"]})


async def list_schedules(request: Request) -> Response:
    rt = dashboard(request).runtime
    try:
        _check_names(request, "schedules")
        limit = _limit(request)
    except _BadQuery as exc:
        return _bad(exc)
    after = request.query_params.get("after") or None
    rows = await run_in_threadpool(lambda: describe_schedules(rt.app, rt.store, now=rt.clock.now(), count=3,
                                                              after=after, limit=limit + 1))
    more = len(rows) > limit
    rows = rows[:limit]
    return json_response({"schedules": rows, "next": rows[-1]["key"] if more else None})


async def get_schedule(request: Request) -> Response:
    rt = dashboard(request).runtime
    key = request.path_params["key"]
    try:
        found: dict[str, Any] = await run_in_threadpool(lambda: describe_schedule(rt.store, rt.app, key,
                                                                                  now=rt.clock.now()))
    except OncebeatError:
        return api_error(404, "not_found", f"no schedule {key[:200]!r}; GET {API_V1}/schedules lists them")
    return json_response(found)


async def get_job(request: Request) -> Response:
    rt = dashboard(request).runtime
    job_id = int(request.path_params["id"])
    job = await run_in_threadpool(Queue(rt.store, clock=rt.clock, source=current_source("api")).get, job_id)
    if job is None:
        return api_error(404, "not_found", f"no job {job_id} (it may have been pruned)")
    return json_response(job)


async def openapi(request: Request) -> Response:
    return json_response(document())


routes = [
    route(f"{API_V1}/openapi.json", openapi, name="api_openapi"),
    route(f"{API_V1}/reminders", list_reminders, name="api_reminders"),
    route(f"{API_V1}/invoices/{{number:path}}", get_invoice, name="api_invoice"),
    route(f"{API_V1}/schedules", list_schedules, name="api_schedules"),
    route(f"{API_V1}/schedules/{{key:path}}", get_schedule, name="api_schedule"),
    route(f"{API_V1}/jobs/{{id:id}}", get_job, name="api_job"),
]
