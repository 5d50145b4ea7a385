"""``POST /webhooks/stripe``: Stripe invoice events, verified and applied once per event id.

The request authenticates itself with Stripe's signature (``Stripe-Signature``
header, secret ``STRIPE_WEBHOOK_SECRET``), so it needs no operator token and no
CSRF field. Answers, as Stripe expects:

- 200 ``{"received": true, "outcome": …}`` for a verified event, whatever it did
  (``applied``, ``duplicate``, ``stale``, ``ignored``, ``invalid``): Stripe must not retry it;
- 400 for a missing, forged or expired signature or a body that is not an event
  (nothing read or written);
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

__all__ = ["SECRET_VARIABLE", "routes"]

log = logging.getLogger("oncebeat.web.webhooks")
SECRET_VARIABLE = "STRIPE_WEBHOOK_SECRET"
MAX_BODY = 1024 * 1024  # Stripe events are a few kB; refuse anything far larger unread


async def stripe_webhook(request: Request) -> Response:
    rt = dashboard(request).runtime
    try:
        hooks = StripeWebhooks(rt.store, clock=rt.clock, secret=os.environ.get(SECRET_VARIABLE), tz=rt.policy.tz)
    except ConfigError as exc:
        return JSONResponse({"error": str(exc)}, status_code=503)
    if int(request.headers.get("content-length") or 0) > MAX_BODY:
        return JSONResponse({"error": "body too large"}, status_code=413)
    body = await request.body()
    try:
        event = hooks.verify(body, request.headers.get("stripe-signature"))
    except WebhookRejected as exc:
        log.warning("stripe webhook rejected: %s", exc, extra={"event": "webhook.rejected"})
        return JSONResponse({"error": str(exc)}, status_code=400)
    outcome = await run_in_threadpool(hooks.apply, event)
    log.info("stripe %s %s: %s %s", outcome.event_type, outcome.event_id, outcome.outcome, outcome.detail,
             extra={"event": "webhook.stripe", "invoice": outcome.invoice})
    return JSONResponse({"received": True, **outcome.as_dict()})


routes = [route("/webhooks/stripe", stripe_webhook, methods=["POST"])]
