"""Send a Celery task by name to the team's broker, as ``celery beat`` would, once per occurrence.

``send_task(name, args, kwargs, task_id=<uuid5 of the push's effect key>, queue=…)`` through Celery's own
client (kombu), with publishing retries off: Celery retries a publish on a connection error by default, and a
publish whose reply was lost would then go out twice. The message carries headers ``oncebeat_schedule``,
``oncebeat_fire_at`` and ``oncebeat_business_date``; an unchanged worker ignores them.

Celery does not deduplicate by ``task_id``: two ``send_task`` calls with one id are two messages and the task
runs twice. The effect ledger, not the id, stops a second push; the id makes a push recognisable in Flower,
the result backend and the worker's log (``Task billing.tasks.x[<id>] received``).

Points: the broker connection established emits ``target.ready`` (a death before it leaves nothing to
doubt); the point of no return is recorded right before the publish; an error during the publish raises
:class:`~oncebeat.errors.EffectOutcomeUnknown`.
"""

from __future__ import annotations

import threading
from typing import Any

from .. import telemetry
from ..effects import EffectAttempt
from ..errors import EffectOutcomeUnknown, TargetError
from ..redact import redact_url
from .spec import Occurrence, Target, derived_uuid

__all__ = ["push"]

CONNECT_TIMEOUT = 10.0
_apps: dict[str, Any] = {}  # one Celery client per broker URL (its producer pool is reused across pushes)
_lock = threading.Lock()


def _client(url: str) -> Any:
    from celery import Celery

    with _lock:
        app = _apps.get(url)
        if app is None:
            app = Celery("oncebeat-push", broker=url, set_as_current=False)
            app.conf.update(broker_connection_timeout=CONNECT_TIMEOUT, task_publish_retry=False,
                            broker_connection_retry=False)
            _apps[url] = app
        return app


def push(target: Target, occ: Occurrence, attempt: EffectAttempt) -> dict[str, Any]:
    """Publish the task message for ``occ``; return ``{"task_id", "task", "queue"}``.

    Raises:
        TargetRejected: the broker URL variable is unset.
        TargetError: the broker could not be reached (nothing was published).
        EffectOutcomeUnknown: the publish failed after it started.
    """
    app = _client(target.url())
    task_id = derived_uuid(occ.key)
    queue = target.options.get("queue")
    with app.producer_or_acquire() as producer:
        try:
            producer.connection.ensure_connection(max_retries=1, timeout=CONNECT_TIMEOUT)
        except Exception as exc:  # kombu raises the transport's own errors (OperationalError, OSError, ...)
            raise TargetError(f"{target.describe()}: broker not reached: {redact_url(str(exc))}") from None
        telemetry.emit("target.ready", {"key": occ.key, "kind": "celery"})
        attempt.point_of_no_return()
        try:
            app.send_task(target.name, args=list(target.options.get("args") or []),
                          kwargs=dict(target.options.get("kwargs") or {}), task_id=task_id, queue=queue,
                          producer=producer, retry=False,
                          headers={"oncebeat_schedule": occ.schedule_key,
                                   "oncebeat_fire_at": occ.describe()["fire_at"],
                                   "oncebeat_business_date": occ.business_date.isoformat()})
        except Exception as exc:
            raise EffectOutcomeUnknown(f"{target.describe()}: the publish of task {task_id} failed midway, it may "
                                       f"be queued: {redact_url(str(exc))}") from None
    telemetry.emit("target.sent", {"key": occ.key, "kind": "celery"})
    return {"task_id": task_id, "task": target.name, "queue": queue or "celery"}
