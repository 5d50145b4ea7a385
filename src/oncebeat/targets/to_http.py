"""POST an occurrence to an HTTP endpoint, signed, with an ``Idempotency-Key``, retried with backoff.

The request (``Content-Type: application/json``)::

    POST /hooks/overdue
    Idempotency-Key: 1b9d6bcd-bbfd-5b2d-9b5d-ab8dfbbd4bed      (uuid5 of the push's effect key)
    Oncebeat-Signature: t=1767196800,v1=<hex HMAC-SHA256(secret, "<t>." + body)>
    {"args": {...}, "business_date": "2026-03-02", "fire_at": "2026-03-02T14:00:00+00:00",
     "idempotency_key": "...", "local_fire_at": "2026-03-02T08:00:00-06:00", "occurrence_id": 17,
     "schedule": "overdue-reminders", "tz": "America/Chicago"}

The endpoint checks the signature as it would Stripe's: recompute the HMAC over ``t``, a dot and the raw body,
compare in constant time, refuse an old ``t``. The body is the same bytes on every attempt.

Outcomes: a 2xx is done (status, headers and up to 4 KiB of the body kept as the effect's result); a 408, 409,
425, 429 or 5xx, or a connection refused before anything was sent, is retried within this attempt with
exponential backoff (0.5 s, 1 s, 2 s, … up to ``attempts`` POSTs), then the job is retried later
(:class:`~oncebeat.errors.TargetError`); any other 4xx is final (:class:`~oncebeat.errors.TargetRejected`,
the job is discarded with the reply). A connection lost after the request went out and before the status
line came back is :class:`~oncebeat.errors.EffectOutcomeUnknown`: the endpoint may have acted, so the push is
in doubt, never re-sent blindly (an endpoint that honours the ``Idempotency-Key`` makes an operator's resend
harmless).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from .. import telemetry
from ..effects import EffectAttempt
from ..errors import EffectOutcomeUnknown, TargetError, TargetRejected
from ..redact import redact_url
from .spec import Occurrence, Target, derived_uuid

__all__ = ["push", "request_body", "sign", "SIGNATURE_HEADER", "RETRY_STATUSES"]

SIGNATURE_HEADER = "Oncebeat-Signature"
RETRY_STATUSES = frozenset({408, 409, 425, 429})  # and every 5xx: the endpoint says it did not act
KEPT_BODY = 4096
FIRST_BACKOFF = 0.5


def request_body(target: Target, occ: Occurrence) -> bytes:
    """The JSON body for ``occ`` (sorted keys: identical bytes on every attempt)."""
    body = {**occ.describe(), "args": target.options.get("args") or {}, "idempotency_key": derived_uuid(occ.key)}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sign(secret: bytes, body: bytes, *, at: int) -> str:
    """The signature header's value: ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``."""
    digest = hmac.new(secret, f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


def push(target: Target, occ: Occurrence, attempt: EffectAttempt, *,
         sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """POST ``occ`` to the endpoint; return ``{"status", "headers", "body", "posts", "idempotency_key"}``.

    Raises:
        TargetRejected: a final 4xx, or the secret variable unset.
        TargetError: no 2xx after ``attempts`` POSTs that certainly did not act (refused, 5xx, 429, ...).
        EffectOutcomeUnknown: the request went out and the reply was lost.
    """
    secret = target.secret()
    body = request_body(target, occ)
    key = derived_uuid(occ.key)
    parts = urlsplit(target.name)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    shown = redact_url(target.name)
    timeout = float(target.options.get("timeout", 10))
    posts = int(target.options.get("attempts", 3))
    last = ""
    for n in range(posts):
        if n:
            sleep(FIRST_BACKOFF * 2 ** (n - 1))
        conn = _connection(parts.scheme, parts.hostname or "", parts.port, timeout)
        try:
            try:
                conn.connect()
            except OSError as exc:  # refused, unreachable, TLS handshake: nothing was sent
                last = f"not reached: {exc}"
                continue
            telemetry.emit("target.ready", {"key": occ.key, "kind": "http"})
            attempt.point_of_no_return()
            headers = {"Content-Type": "application/json", "Idempotency-Key": key, "User-Agent": "oncebeat",
                       SIGNATURE_HEADER: sign(secret, body, at=int(time.time()))}
            try:
                conn.request("POST", path, body=body, headers=headers)
                telemetry.emit("target.sent", {"key": occ.key, "kind": "http"})
                response = conn.getresponse()
                data = response.read(KEPT_BODY)
            except (OSError, http.client.HTTPException) as exc:
                raise EffectOutcomeUnknown(f"POST {shown}: the request went out and no reply came "
                                           f"({type(exc).__name__}: {exc}); Idempotency-Key {key}") from None
        finally:
            conn.close()
        status = response.status
        text = data.decode("utf-8", "replace")
        if 200 <= status < 300:
            return {"status": status, "headers": {k: v for k, v in response.getheaders()
                                                   if k.lower() in ("content-type", "location", "request-id",
                                                                    "x-request-id")},
                    "body": text, "posts": n + 1, "idempotency_key": key}
        if status in RETRY_STATUSES or status >= 500:
            last = f"HTTP {status} {response.reason}: {text[:200]}"
            continue
        raise TargetRejected(f"POST {shown}: HTTP {status} {response.reason}: {text[:500]}")
    raise TargetError(f"POST {shown}: {posts} POST(s) without success, last {last}")


def _connection(scheme: str, host: str, port: int | None, timeout: float) -> http.client.HTTPConnection:
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
    return http.client.HTTPConnection(host, port, timeout=timeout)
