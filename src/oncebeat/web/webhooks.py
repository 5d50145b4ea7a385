"""``POST /webhooks/stripe``: Stripe invoice events, verified and applied once per event id.

The request authenticates itself with Stripe's signature (``Stripe-Signature``
header, secret ``STRIPE_WEBHOOK_SECRET``), so it needs no operator token and no
CSRF field. Answers, as Stripe expects:

- 200 ``{"received": true, "outcome": …}`` for a verified event, whatever it did
  (``applied``, ``duplicate``, ``stale``, ``ignored``, ``invalid``): Stripe must not retry it;
- 400 for a missing, forged or expired signature or a body that is not an event: not JSON,
  nested deeper than JSON allows, or JSON of another shape (an array, a number, ``data`` or
  ``data.object`` not an object); nothing read or written, and Stripe does not retry a 400 forever
  as it would a 500;
- 413 for a body past :data:`MAX_BODY` bytes, counted while reading whatever ``Content-Length`` or
  chunked encoding say (reading stops at the limit: memory stays bounded);
- 503 when ``STRIPE_WEBHOOK_SECRET`` is not set (Stripe retries later).

The rules live in :mod:`oncebeat.reminders.stripe`; this module only parses and answers.
"""

from __future__ import annotations

import logging
import os

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import ConfigError
from ..reminders.stripe import StripeWebhooks, WebhookRejected
from .app import dashboard, route

__all__ = ["MAX_BODY", "SECRET_VARIABLE", "read_body", "routes"]

log = logging.getLogger("oncebeat.web.webhooks")
SECRET_VARIABLE = "STRIPE_WEBHOOK_SECRET"
MAX_BODY = 1024 * 1024  # Stripe events are a few kB; refuse anything far larger unread


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as more than ``limit`` bytes are announced or received.

    Bytes are counted as they arrive (``request.stream()``), so a chunked body or a lying
    ``Content-Length`` never makes the process hold more than ``limit`` bytes of it.
    """
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        return None
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


async def stripe_webhook(request: Request) -> Response:
    rt = dashboard(request).runtime
    try:
        hooks = StripeWebhooks(rt.store, clock=rt.clock, secret=os.environ.get(SECRET_VARIABLE), tz=rt.policy.tz,
                               calendar=rt.policy.calendar)
    except ConfigError as exc:
        return JSONResponse({"error": str(exc)}, status_code=503)
    body = await read_body(request, MAX_BODY)
    if body is None:
        # Close the connection: the rest of the body is never read (nor received into memory).
        return JSONResponse({"error": f"body too large: the limit is {MAX_BODY} bytes"}, status_code=413,
                            headers={"connection": "close"})
    try:
        event = hooks.verify(body, request.headers.get("stripe-signature"))
    except WebhookRejected as exc:
        log.warning("stripe webhook rejected: %s", exc, extra={"event": "webhook.rejected"})
        return JSONResponse({"error": str(exc)}, status_code=400)
    outcome = await run_in_threadpool(hooks.apply, event)
    # Event type, id and outcome only: the detail may quote a customer's value (an address refused) and the web
    # process logs at INFO by default; both are kept in stripe_events and returned to Stripe.
    log.info("stripe %s %s: %s", outcome.event_type, outcome.event_id, outcome.outcome,
             extra={"event": "webhook.stripe", "outcome": outcome.outcome})
    return JSONResponse({"received": True, **outcome.as_dict()})


routes = [route("/webhooks/stripe", stripe_webhook, methods=["POST"])]
