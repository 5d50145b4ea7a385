"""Push a Sidekiq job in Sidekiq's own wire format, so an unchanged Ruby worker runs it.

Sidekiq's client (``Sidekiq::Client#raw_push``, 6.x) writes a job as a JSON hash LPUSHed to the list
``queue:NAME`` after SADDing ``NAME`` to the set ``queues``; the server BRPOPs the list. This module writes
the same hash (``class``, ``args``, ``queue``, ``jid``, ``retry``, ``created_at``, ``enqueued_at`` as float
Unix seconds) in one ``MULTI``/``EXEC``, so both keys change or neither. Under redis-namespace (``namespace``)
both keys carry the prefix. An extra ``oncebeat`` field names the occurrence; Sidekiq keeps unknown fields
and shows them in its Web UI. With ``activejob = true`` the job is what Rails' Sidekiq adapter writes for
``perform_later``: class ``ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper``, ``wrapped`` the job's class,
and the serialised Active Job (``job_class``, ``job_id``, ``arguments``, …) as its one argument.

The ``jid`` derives from the occurrence, but Sidekiq (without Enterprise's unique jobs) does not deduplicate
by it: the effect ledger, not the id, stops a second push.

Points: connected (``PING`` answered) emits ``target.ready`` — a death before it leaves nothing to doubt;
the point of no return is recorded right before ``EXEC``; a connection lost during ``EXEC`` raises
:class:`~oncebeat.errors.EffectOutcomeUnknown` (the job may be in the list).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from .. import telemetry
from ..effects import EffectAttempt
from ..errors import EffectOutcomeUnknown, TargetError
from ..redact import redact_url
from .spec import Occurrence, Target, derived_jid, derived_uuid

__all__ = ["ACTIVEJOB_WRAPPER", "activejob_payload", "job_hash", "push"]

TIMEOUT = 10.0  # seconds to connect and for each reply
ACTIVEJOB_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"


def job_hash(target: Target, occ: Occurrence, *, now: float) -> dict[str, Any]:
    """The Sidekiq job hash for ``occ`` (``now``: Unix seconds of the push)."""
    queue = target.options.get("queue", "default")
    args = list(target.options.get("args") or [])
    job = {"class": target.name, "args": args, "queue": queue, "retry": target.options.get("retry", True),
           "jid": derived_jid(occ.key), "created_at": now, "enqueued_at": now, "oncebeat": occ.describe()}
    if target.options.get("activejob"):
        job.update({"class": ACTIVEJOB_WRAPPER, "wrapped": target.name, "args": [activejob_payload(target, occ)]})
    return job


def activejob_payload(target: Target, occ: Occurrence) -> dict[str, Any]:
    """What ``ActiveJob::Base#serialize`` (Rails 6.1-7) writes for ``perform_later(*args)``: the wrapper's one
    argument. The Active Job ``job_id`` is derived from the occurrence like the ``jid``."""
    return {"job_class": target.name, "job_id": derived_uuid(occ.key), "provider_job_id": None,
            "queue_name": target.options.get("queue", "default"), "priority": None,
            "arguments": [_activejob_argument(a) for a in target.options.get("args") or []], "executions": 0,
            "exception_executions": {}, "locale": "en", "timezone": "UTC",
            "enqueued_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _activejob_argument(value: Any) -> Any:
    """Active Job's argument serialisation for JSON values: a Hash gets ``_aj_symbol_keys`` (none: string keys)."""
    if isinstance(value, list):
        return [_activejob_argument(v) for v in value]
    if isinstance(value, dict):
        return {**{k: _activejob_argument(v) for k, v in value.items()}, "_aj_symbol_keys": []}
    return value


def push(target: Target, occ: Occurrence, attempt: EffectAttempt) -> dict[str, Any]:
    """LPUSH the job for ``occ``; return ``{"jid", "queue", "list_length"}``.

    Raises:
        TargetRejected: the Redis URL variable is unset.
        TargetError: Redis could not be reached, or refused the commands (nothing was pushed).
        EffectOutcomeUnknown: the connection was lost during ``EXEC``.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    url = target.url()
    # No automatic retry: a re-sent EXEC after a lost reply would push the job twice.
    client = redis.Redis.from_url(url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                                  retry=Retry(NoBackoff(), 0), retry_on_error=[], health_check_interval=0)
    try:
        try:
            client.ping()
        except redis.RedisError as exc:
            raise TargetError(f"{target.describe()}: Redis not reached: {redact_url(str(exc))}") from None
        queue = str(target.options.get("queue", "default"))
        prefix = f"{target.options['namespace']}:" if target.options.get("namespace") else ""
        job = job_hash(target, occ, now=time.time())
        telemetry.emit("target.ready", {"key": occ.key, "kind": "sidekiq"})
        attempt.point_of_no_return()
        pipe = client.pipeline(transaction=True)
        pipe.sadd(f"{prefix}queues", queue)
        pipe.lpush(f"{prefix}queue:{queue}", json.dumps(job, separators=(",", ":")))
        try:
            replies = pipe.execute()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise EffectOutcomeUnknown(f"{target.describe()}: connection lost during EXEC, the job may be queued "
                                       f"(jid {job['jid']}): {redact_url(str(exc))}") from None
        except redis.RedisError as exc:  # EXECABORT or a wrong key type: the list did not get the job
            raise TargetError(f"{target.describe()}: Redis refused the push: {redact_url(str(exc))}") from None
        telemetry.emit("target.sent", {"key": occ.key, "kind": "sidekiq"})
        return {"jid": job["jid"], "queue": queue, "list_length": int(replies[1])}
    finally:
        client.close()
