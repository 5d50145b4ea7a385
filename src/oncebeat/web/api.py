"""The HTTP API's writes, ``/api/v1``: upsert customers, invoices and payments, trigger, pause and resume
schedules, enqueue a job. Reads are in :mod:`oncebeat.web.api_reads`; who may call is in
:mod:`oncebeat.web.api_auth`; the document is :mod:`oncebeat.web.openapi` (``GET /api/v1/openapi.json``).

Every write (POST) needs an ``Idempotency-Key`` header and goes through :func:`oncebeat.idempotency.once`: the
key, the write and its answer commit in one transaction, so a retried request is applied once and answered as
the first time (header ``Idempotent-Replayed: true``); the same key with another request answers 422. Bodies
are JSON, at most 1 MiB (:data:`~oncebeat.web.security.MAX_API_BYTES`, 413 past it) and
:data:`~oncebeat.reminders.sources.api.MAX_ITEMS` objects; every problem is named by a JSON pointer (422).

The rows go through the CSV import's checks (:mod:`oncebeat.reminders.sources.api`) and the service's own
upsert and payment verbs (a paid invoice is never reopened by a stale write); schedules through
:mod:`oncebeat.schedule_admin`, jobs through :class:`oncebeat.queue.Queue` (registered tasks only). Each write
is audited (``api.write``) with the token's name as the operator. This module only parses and answers.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import audit, idempotency
from ..errors import IdempotencyKeyReused, OncebeatError
from ..provenance import Source, api_operator, current_source
from ..queue import Queue
from ..reminders.sources.api import (
    FieldProblem,
    RequestRejected,
    problem_list,
    read_customers,
    read_invoices,
    read_payments,
)
from ..schedule_admin import pause_schedule, resume_schedule, schedule_known, trigger_schedule
from ..schedules_report import describe_schedules
from ..store import Tx
from .api_auth import ApiClient, api_error
from .app import dashboard, route

__all__ = ["API_V1", "JOB_FIELDS", "MAX_PRIORITY", "dumps", "json_response", "routes"]

API_V1 = "/api/v1"
SOURCE_NAME = "oncebeat web api"
MAX_PRIORITY = 1_000_000
MAX_ATTEMPTS = 1000
JOB_FIELDS = ("task", "args", "queue", "priority", "run_at", "max_attempts", "unique_key")
_PRUNE_EVERY = 60.0  # seconds between two prunes of expired idempotency keys by this process

Write = Callable[[Tx, Source], tuple[int, dict[str, Any]]]


def _plain(value: Any) -> Any:
    """JSON for what the library returns: instants and dates in ISO form (with offset), dataclasses as objects."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"{type(value).__name__} is not JSON")


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (the stored and replayed form of an answer)."""
    return json.dumps(value, default=_plain, separators=(",", ":"), ensure_ascii=False)


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``value`` as an ``application/json`` answer."""
    return Response(dumps(value), status_code=status, media_type="application/json", headers=headers)


def client_of(request: Request) -> ApiClient:
    """The API client the gate admitted (:class:`~oncebeat.web.api_auth.ApiTokens`)."""
    client = request.state.api_client
    assert isinstance(client, ApiClient)  # the gate admits no /api request without one
    return client


def api_source(client: ApiClient) -> Source:
    """Provenance of an API write: kind ``api``, process ``oncebeat web api``, operator the token's name (G8)."""
    return current_source("api", name=SOURCE_NAME, operator=api_operator(client.name))


def rejected(problems: list[FieldProblem], total: int | None = None) -> Response:
    """422 naming every problem by JSON pointer; nothing was applied."""
    count = total if total is not None else len(problems)
    first = problems[0] if problems else FieldProblem(pointer="", message="refused")
    more = f" (and {count - 1} more problem{'s' if count > 2 else ''})" if count > 1 else ""
    return api_error(422, "invalid_request", f"{first}{more}; nothing was applied", problems=problem_list(problems),
                     total=count)


class Refused(Exception):
    """Raised by a write's preparation to answer ``response`` instead (e.g. 404 for an unknown schedule)."""

    def __init__(self, response: Response) -> None:
        super().__init__("refused")
        self.response = response


def _decode(raw: bytes) -> tuple[Any, Response | None]:
    """The JSON body, or the 400 answer for a body that is not JSON (never a 500)."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON (write a number)")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):  # 1e999 reads as infinity, which no database column stores as JSON
            raise ValueError(f"{text[:20]} is too large a number")
        return value

    try:
        return json.loads(raw.decode("utf-8"), parse_constant=refuse, parse_float=finite), None
    except UnicodeDecodeError:
        return None, api_error(400, "bad_json", "the body is not UTF-8 text")
    except RecursionError:
        return None, api_error(400, "bad_json", "the body nests deeper than this server reads")
    except ValueError as exc:  # JSONDecodeError too
        return None, api_error(400, "bad_json", f"the body is not JSON: {exc}; send Content-Type: "
                                                "application/json with a JSON object")


async def keyed_write(request: Request, prepare: Callable[[Any], Write], *, body_required: bool = True) -> Response:
    """The frame of every write: the key's check, the body's decoding and checks (``prepare``), then the write
    and its answer stored under the key in one transaction (:func:`oncebeat.idempotency.once`)."""
    client = client_of(request)
    key = request.headers.get("idempotency-key")
    problem = idempotency.key_problem(key)
    if problem is not None or key is None:
        return api_error(400, "idempotency_key", problem or "missing Idempotency-Key")
    raw = await request.body()  # bounded by BodyLimit (413 past MAX_API_BYTES)
    rt = dashboard(request).runtime
    try:  # a retry is answered without checking its body again (once() below decides on its own)
        earlier = await run_in_threadpool(lambda: idempotency.stored(
            rt.store, client=client.name, key=key, method=request.method, path=request.url.path, body=raw))
    except IdempotencyKeyReused as exc:
        return api_error(422, "idempotency_key_reused", str(exc))
    if earlier is not None:
        return _answer(earlier)
    body: Any = None
    if raw.strip() or body_required:
        body, refusal = _decode(raw)
        if refusal is not None:
            return refusal
    try:
        write = await run_in_threadpool(prepare, body)
    except RequestRejected as exc:
        return rejected(exc.problems, exc.total)
    except Refused as exc:
        return exc.response
    source = api_source(client)

    def work(tx: Tx) -> tuple[int, str]:
        status, payload = write(tx, source)
        audit.record(tx, now=rt.clock.now(), kind="api.write", subject=f"api:{client.name}", source=source,
                     detail={"method": request.method, "path": request.url.path, "idempotency_key": key,
                             "status": status})
        return status, dumps(payload)

    try:
        answer = await run_in_threadpool(lambda: idempotency.once(
            rt.store, client=client.name, key=key, method=request.method, path=request.url.path, body=raw,
            now=rt.clock.now(), write=work))
    except RequestRejected as exc:
        return rejected(exc.problems, exc.total)
    except IdempotencyKeyReused as exc:
        return api_error(422, "idempotency_key_reused", str(exc))
    if not answer.replayed:
        await _prune_now_and_then(request)
    return _answer(answer)


def _answer(answer: idempotency.Answer) -> Response:
    headers = {"idempotent-replayed": "true"} if answer.replayed else None
    return Response(answer.body, status_code=answer.status, media_type="application/json", headers=headers)


async def _prune_now_and_then(request: Request) -> None:
    """Delete a bounded batch of expired idempotency keys, at most once a minute per process."""
    d = dashboard(request)
    last = d.cache.get("api_prune", 0.0)
    if time.monotonic() - last < _PRUNE_EVERY:
        return
    d.cache["api_prune"] = time.monotonic()
    await run_in_threadpool(lambda: idempotency.prune(d.runtime.store, now=d.runtime.clock.now()))


def _today(request: Request) -> date:
    rt = dashboard(request).runtime
    return rt.clock.now().astimezone(rt.policy.zone).date()


async def upsert_customers(request: Request) -> Response:
    service = dashboard(request).runtime.service

    def prepare(body: Any) -> Write:
        customers = read_customers(body)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            service.upsert(customers, [], tx=tx)
            return 200, {"customers": len(customers)}
        return write

    return await keyed_write(request, prepare)


async def upsert_invoices(request: Request) -> Response:
    service = dashboard(request).runtime.service
    today = _today(request)

    def prepare(body: Any) -> Write:
        invoices, customers = read_invoices(body, today=today)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            counts = service.upsert(customers, invoices, tx=tx)
            return 200, {"customers": counts["customers"], "invoices": counts["invoices"], "new": counts["new"],
                         "updated": counts["updated"], "kept_paid": counts["kept paid"], "stale": counts["stale"]}
        return write

    return await keyed_write(request, prepare)


async def record_payments(request: Request) -> Response:
    service = dashboard(request).runtime.service
    today = _today(request)

    def prepare(body: Any) -> Write:
        payments = read_payments(body, today=today)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            found = service.unpayable(payments, tx)
            if found:  # rolls the key back with the rest: the client may fix the request and send the key again
                raise RequestRejected([FieldProblem(pointer=f"/payments/{n}/{column}", message=text)
                                       for n, column, text in found])
            counts = service.apply_payments(payments, tx=tx)
            return 200, {"payments": counts["payments"], "marked_paid": counts["marked_paid"],
                         "already_closed": counts["unchanged (already closed)"]}
        return write

    return await keyed_write(request, prepare)


def _known_schedule(request: Request, key: str) -> None:
    """Return when schedule ``key`` can be acted on (the code's definitions synced first), else raise its 404/409.

    Raises:
        Refused: unknown (404) or retired (409).
    """
    rt = dashboard(request).runtime
    if not describe_schedules(rt.app, rt.store, now=rt.clock.now(), count=0, keys=[key]):
        raise Refused(api_error(404, "not_found", f"no schedule {key[:200]!r}; GET {API_V1}/schedules lists them"))
    try:
        schedule_known(rt.store, rt.app, key, clock=rt.clock)
    except OncebeatError as exc:  # retired
        raise Refused(api_error(409, "conflict", str(exc))) from exc


async def schedule_action(request: Request) -> Response:
    rt = dashboard(request).runtime
    key = request.path_params["key"]
    action = request.url.path.rsplit("/", 1)[-1]

    def prepare(body: Any) -> Write:
        if body is not None and body != {}:
            raise RequestRejected([FieldProblem(pointer="", message=f"{action} takes no body (send none, or {{}})")])
        _known_schedule(request, key)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            if action == "trigger":
                fire = trigger_schedule(rt.store, rt.app, key, source=source, clock=rt.clock, tx=tx)
                return 200, {"schedule": key, "occurrence_id": fire.occurrence_id, "job_id": fire.job_id,
                             "fire_at": fire.fire_at, "local_fire_at": fire.local, "outcome": fire.outcome,
                             "description": fire.describe()}
            verb = pause_schedule if action == "pause" else resume_schedule
            changed = verb(rt.store, rt.app, key, source=source, clock=rt.clock, tx=tx)
            return 200, {"schedule": key, "state": "paused" if action == "pause" else "active", "changed": changed}
        return write

    return await keyed_write(request, prepare, body_required=False)


def _job_request(body: Any, tasks: dict[str, Any]) -> dict[str, Any]:
    """The enqueue options of ``body``, checked; raises RequestRejected naming each bad field."""
    problems: list[FieldProblem] = []

    def bad(name: str, message: str) -> None:
        problems.append(FieldProblem(pointer=f"/{name}" if name else "", message=message))

    if not isinstance(body, dict):
        raise RequestRejected([FieldProblem(pointer="", message='the body must be a JSON object such as {"task": '
                                                                '"reminders.scan", "args": {}}')])
    for name in body:
        if name not in JOB_FIELDS:
            bad(name, f"unknown field; the fields are {', '.join(JOB_FIELDS)}")
    out: dict[str, Any] = {}
    task = body.get("task")
    if not isinstance(task, str) or not task:
        bad("task", "required: the name of a task registered in the app")
    elif task not in tasks:
        bad("task", f"{task[:80]!r} is not a task of this app (registered: {', '.join(sorted(tasks)) or 'none'})")
    else:
        out["task"] = task
    args = body.get("args", {})
    if not isinstance(args, dict):
        bad("args", "must be an object: the task's keyword arguments")
    out["args"] = args if isinstance(args, dict) else {}
    for name in ("queue", "unique_key"):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or not value or len(value) > 200
                                  or not value.isprintable()):
            bad(name, "must be a printable string of 1 to 200 characters")
        elif value is not None:
            out[name] = value
    for name, low, high in (("priority", -MAX_PRIORITY, MAX_PRIORITY), ("max_attempts", 1, MAX_ATTEMPTS)):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            bad(name, f"must be a whole number from {low} to {high}")
        elif value is not None:
            out[name] = value
    run_at = body.get("run_at")
    if run_at is not None:
        try:
            when = datetime.fromisoformat(run_at) if isinstance(run_at, str) else None
        except ValueError:
            when = None
        if when is None or when.tzinfo is None or not 1970 <= when.year <= 2999:
            bad("run_at", "must be an ISO instant with its UTC offset, e.g. 2026-03-01T08:00:00-06:00")
        else:
            out["run_at"] = when
    if problems:
        raise RequestRejected(problems)
    return out


async def enqueue_job(request: Request) -> Response:
    rt = dashboard(request).runtime

    def prepare(body: Any) -> Write:
        options = _job_request(body, rt.app.tasks)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            queue = Queue(rt.store, clock=rt.clock, source=source, app=rt.app)
            rest = {k: v for k, v in options.items() if k not in ("task", "args")}
            task = options["task"]
            job_id = queue.enqueue(task, options["args"], tx=tx, **rest)
            if job_id is None:
                return 409, {"error": {"type": "unique_key_held", "message": f"unique_key {options['unique_key']!r} "
                                       "is held by an unfinished job: nothing enqueued"}}
            return 201, {"job_id": job_id, "task": task, "url": f"{API_V1}/jobs/{job_id}"}
        return write

    return await keyed_write(request, prepare)


routes = [
    route(f"{API_V1}/customers", upsert_customers, methods=["POST"], name="api_customers"),
    route(f"{API_V1}/invoices", upsert_invoices, methods=["POST"], name="api_invoices"),
    route(f"{API_V1}/payments", record_payments, methods=["POST"], name="api_payments"),
    route(f"{API_V1}/schedules/{{key:path}}/trigger", schedule_action, methods=["POST"], name="api_trigger"),
    route(f"{API_V1}/schedules/{{key:path}}/pause", schedule_action, methods=["POST"], name="api_pause"),
    route(f"{API_V1}/schedules/{{key:path}}/resume", schedule_action, methods=["POST"], name="api_resume"),
    route(f"{API_V1}/jobs", enqueue_job, methods=["POST"], name="api_enqueue"),
]
