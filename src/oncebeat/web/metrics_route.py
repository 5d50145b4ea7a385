"""``GET /metrics``: the Prometheus exposition of this database's gauges (see :mod:`oncebeat.metrics`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..metrics import exposition
from .app import dashboard, route

__all__ = ["routes"]


def metrics(request: Request) -> Response:
    rt = dashboard(request).runtime
    body, content_type = exposition(rt.store, clock=rt.clock, cache=dashboard(request).cache)
    return Response(body, media_type=content_type, headers={"cache-control": "no-store"})


routes = [route("/metrics", metrics)]
