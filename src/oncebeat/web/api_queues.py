"""The HTTP API's queues, ``/api/v1/queues``: read each queue's depth, latency, throughput, pause and limit; pause,
resume and limit a queue.

The numbers are the dashboard's Queues page's (:func:`oncebeat.web.queues.queue_rows`); the writes call the
engine's verbs (:func:`oncebeat.pauses.pause_queue` / :func:`~oncebeat.pauses.resume_queue`,
:func:`oncebeat.queue_limits.set_queue_limit` / :func:`~oncebeat.queue_limits.clear_queue_limit`) in the
transaction of the request's Idempotency-Key (:func:`oncebeat.web.api.keyed_write`), so each is audited with the
token's name as the operator (``queue.paused``, ``queue.limited``… and ``api.write``) and a retry is applied once.
This module only parses and answers.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import OncebeatError
from ..pauses import check_queue_name, pause_queue, resume_queue
from ..provenance import Source
from ..queue_limits import MAX_LIMIT, clear_queue_limit, set_queue_limit
from ..reminders.sources.api import FieldProblem, RequestRejected
from ..store import Tx
from .api import API_V1, Refused, Write, json_response, keyed_write
from .api_auth import api_error
from .app import dashboard, route
from .queues import THROUGHPUT_WINDOW, queue_rows

__all__ = ["QUEUE_FIELDS", "routes"]

#: The fields of each queue in GET /api/v1/queues, in order.
QUEUE_FIELDS = ("queue", "paused", "paused_at", "paused_by", "available", "scheduled", "running", "held",
                "latency_seconds", "completed", "discarded", "cancelled", "throughput_window_seconds", "limit")


def _queue_name(request: Request) -> str:
    try:
        return check_queue_name(request.path_params["queue"])
    except OncebeatError as exc:
        raise Refused(api_error(422, "invalid_request", f"queue name: {exc}",
                                problems=[{"pointer": "", "field": "queue", "message": str(exc)}])) from None


async def list_queues(request: Request) -> Response:
    rt = dashboard(request).runtime
    for name in request.query_params:
        return api_error(400, "invalid_query", f"query parameter {name[:40]}: unknown parameter; "
                                               f"GET {API_V1}/queues takes none",
                         problems=[{"pointer": "", "field": name[:40], "message": "unknown parameter"}])
    rows = await run_in_threadpool(queue_rows, rt, rt.clock.now())
    window = int(THROUGHPUT_WINDOW.total_seconds())
    return json_response({"queues": [
        {"queue": r["queue"], "paused": r["paused"], "paused_at": r["paused_at"], "paused_by": r["paused_by"],
         "available": r["available"], "scheduled": r["scheduled"], "running": r["running"], "held": r["held"],
         "latency_seconds": r["latency"], "completed": r["completed"], "discarded": r["discarded"],
         "cancelled": r["cancelled"], "throughput_window_seconds": window, "limit": r["limit"]} for r in rows]})


async def set_state(request: Request) -> Response:
    rt = dashboard(request).runtime
    pause = request.url.path.endswith("/pause")
    action = "pause" if pause else "resume"

    def prepare(body: Any) -> Write:
        if body is not None and body != {}:
            raise RequestRejected([FieldProblem(pointer="", message=f"{action} takes no body (send none, or {{}})")])
        name = _queue_name(request)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            verb = pause_queue if pause else resume_queue
            changed = verb(rt.store, name, source=source, clock=rt.clock, tx=tx)
            return 200, {"queue": name, "state": "paused" if pause else "active", "changed": changed}
        return write

    return await keyed_write(request, prepare, body_required=False)


async def set_limit(request: Request) -> Response:
    rt = dashboard(request).runtime

    def prepare(body: Any) -> Write:
        example = '{"limit": 3} (or {"limit": null} for no limit)'
        if not isinstance(body, dict):
            raise RequestRejected([FieldProblem(pointer="", message=f"the body must be a JSON object such as "
                                                                    f"{example}")])
        problems = [FieldProblem(pointer=f"/{k}", message="unknown field; the only field is limit")
                    for k in body if k != "limit"]
        if "limit" not in body:
            problems.append(FieldProblem(pointer="/limit", message=f"required: a whole number of jobs from 1 to "
                                                                   f"{MAX_LIMIT}, or null for no limit"))
        limit = body.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or not 1 <= limit <= MAX_LIMIT):
            problems.append(FieldProblem(pointer="/limit", message=f"{str(limit)[:40]!r} is not a limit: give a "
                                                                   f"whole number of jobs from 1 to {MAX_LIMIT}, or "
                                                                   "null for no limit (to stop a queue, pause it)"))
        if problems:
            raise RequestRejected(problems)
        name = _queue_name(request)

        def write(tx: Tx, source: Source) -> tuple[int, dict[str, Any]]:
            if limit is None:
                before = clear_queue_limit(rt.store, name, source=source, clock=rt.clock, tx=tx)
                return 200, {"queue": name, "limit": None, "before": before, "changed": before is not None}
            before = set_queue_limit(rt.store, name, limit, source=source, clock=rt.clock, tx=tx)
            return 200, {"queue": name, "limit": limit, "before": before, "changed": before != limit}
        return write

    return await keyed_write(request, prepare)


routes = [
    route(f"{API_V1}/queues", list_queues, methods=["GET"], name="api_queues"),
    route(f"{API_V1}/queues/{{queue:path}}/pause", set_state, methods=["POST"], name="api_queue_pause"),
    route(f"{API_V1}/queues/{{queue:path}}/resume", set_state, methods=["POST"], name="api_queue_resume"),
    route(f"{API_V1}/queues/{{queue:path}}/limit", set_limit, methods=["POST"], name="api_queue_limit"),
]
