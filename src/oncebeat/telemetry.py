"""A small telemetry seam: the engine emits named events; metrics (and anything else) subscribe.

Engine code calls :func:`emit` at the moments an operator measures; subscribers are attached with
:func:`attach` and never wired into engine code by hand. A subscriber that raises is logged and
detached from nothing: the event is dropped for it, the engine goes on (telemetry must never fail a job).

Subscribers shipped: :mod:`oncebeat.metrics` (Prometheus), :mod:`oncebeat.logconfig` (a line per job) and
:mod:`oncebeat.tracing` (OpenTelemetry spans).

Events (``data`` keys; seconds are floats, instants aware UTC):

- ``job.claimed`` — a worker claimed a batch: ``worker_id``, ``count``, ``queues``, ``seconds`` (the claim).
- ``job.batch_step`` — a worker moves on to the next job of its batch: ``worker_id``, ``done``, ``left``.
- ``job.batch_done`` — a worker ran its whole batch and is about to record it: ``worker_id``, ``count``.
- ``job.failed`` — an attempt failed and was recorded: ``task``, ``queue``, ``attempt``, ``state``
  (``retryable``, ``discarded``, ``lost-lease``), ``kind``.
- ``job.lost`` — fencing: a worker dropped a job it no longer holds (lease expired, taken over, or the worker
  fenced itself) without recording anything on it: ``task``, ``queue``, ``attempt``, ``started`` (False: dropped
  before its handler ran), ``reason``.
- ``worker.fenced`` — a worker's heartbeats failed up to the end of a lease: it starts no new effect, gives its
  batch up and claims nothing until a heartbeat gets through: ``worker_id``, ``jobs`` (held).
- ``job.rescued`` — jobs whose lease expired were put back or discarded: ``count``, ``jobs``
  (``[{"id", "task", "state"}]``).
- ``job.started`` — a worker starts a claimed job: ``job_id``, ``task``, ``queue``, ``attempt``,
  ``occurrence_id`` (None for a job no schedule fired), ``latency_seconds`` (from the job's ``run_at`` to the
  start: claim-to-start latency).
- ``job.finished`` — its handler returned or raised: ``job_id``, ``task``, ``queue``, ``attempt``,
  ``outcome`` (``completed``, ``retry``, ``discard``, ``in_doubt``, ``effect_conflict``, ``busy``, ``error``,
  ``unknown_task``, ``lease_lost``), ``seconds`` (run time).
- ``occurrence.recorded`` — the clock (or an operator) recorded an occurrence: ``schedule``, ``outcome``
  (enqueued, missed, coalesced, paused, manual, backfilled), ``lag_seconds`` (recording instant minus
  fire instant), ``occurrence_id``, ``fire_at`` and ``recorded_at`` (aware UTC), ``job_id`` when known.
- ``occurrence.duplicate`` — the ledger turned away a second record of one occurrence: ``schedule``.
- ``effect.requested`` — a handler asks for an effect, before its key is claimed: ``key``.
- ``effect.no_return`` — the effect recorded its point of no return (nothing has left yet): ``key``.
- ``effect.performed`` — the effect's function returned; the outcome is not recorded yet: ``key``.
- ``effect.batch`` — the process's group commit is about to write the done records of the effects whose functions
  returned and that wait at that moment, in one transaction: ``keys`` (one or more).
- ``effect.recorded`` — the ledger recorded that the effect happened: ``key``, ``state`` (``done``).
- ``mail.reply`` — an SMTP delivery ended: ``reply_class`` (``2xx``, ``4xx``, ``5xx``, or ``none`` when no
  reply came: connect, TLS, timeout, a drop).
- ``mail.connecting``, ``mail.data``, ``mail.final_dot`` — an SMTP send is about to connect, to send ``DATA``,
  and has sent the final ``.`` (no reply read yet).
- ``target.ready``, ``target.sent`` — a push to a schedule's target (:mod:`oncebeat.targets`) is connected, before
  its point of no return; and has gone out (for HTTP: the request, before the reply): ``key``, ``kind``.
- ``reminder.finished`` — a send decided a reminder: ``stage``, ``state`` (sent, skipped, failed, in_doubt).

A subscriber may stop the engine on purpose only with a ``BaseException`` that is not an ``Exception``
(the crash points of :mod:`oncebeat.crashpoints` raise ``SimulatedCrash``, a simulated ``kill -9``).

Example::

    from oncebeat import telemetry
    telemetry.attach("job.finished", lambda event, data: print(event, data["task"], data["seconds"]))
    with telemetry.span("job.claimed", {"worker_id": 7}) as data:   # emitted on exit with "seconds"
        data["count"] = 3
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["EVENTS", "Handler", "attach", "detach", "emit", "listening", "span"]

log = logging.getLogger("oncebeat.telemetry")

EVENTS = ("job.claimed", "job.batch_step", "job.batch_done", "job.started", "job.finished", "job.failed",
          "job.lost", "worker.fenced", "job.rescued", "occurrence.recorded", "occurrence.duplicate",
          "effect.requested", "effect.no_return", "effect.performed", "effect.batch", "effect.recorded",
          "mail.connecting", "mail.data", "mail.final_dot", "mail.reply", "target.ready", "target.sent",
          "reminder.finished", "reminder.cap_counted")
Handler = Callable[[str, Mapping[str, Any]], None]
_handlers: dict[str, tuple[Handler, ...]] = {}
_lock = threading.Lock()


def attach(event: str, handler: Handler) -> None:
    """Call ``handler(event, data)`` on each :func:`emit` of ``event`` (attaching twice has no effect).

    Raises:
        ValueError: ``event`` is not one of :data:`EVENTS`.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown telemetry event {event!r}; use one of {', '.join(EVENTS)}")
    with _lock:
        current = _handlers.get(event, ())
        if handler not in current:
            _handlers[event] = (*current, handler)


def detach(event: str, handler: Handler) -> None:
    """Stop calling ``handler`` for ``event`` (no error if it was not attached)."""
    with _lock:
        _handlers[event] = tuple(h for h in _handlers.get(event, ()) if h != handler)


def emit(event: str, data: Mapping[str, Any]) -> None:
    """Tell every subscriber of ``event``; cheap when nobody listens. Never raises."""
    for handler in _handlers.get(event, ()):
        try:
            handler(event, data)
        except Exception as exc:  # noqa: BLE001 - a broken subscriber must not fail the engine
            log.warning("telemetry subscriber %r failed on %s: %s", handler, event, exc,
                        extra={"event": "telemetry.subscriber_failed"})


def listening(event: str) -> bool:
    """True when ``event`` has a subscriber (skip building costly ``data`` when nobody listens)."""
    return bool(_handlers.get(event))


@contextmanager
def span(event: str, data: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Time a block and :func:`emit` ``event`` when it ends without an exception.

    Yields the ``data`` dict so the block can add keys (e.g. how many jobs it claimed); ``seconds``
    (monotonic, float) is added on exit. A block that raises emits nothing: the failure has its own event.
    """
    payload = data if data is not None else {}
    started = time.monotonic()
    yield payload
    payload["seconds"] = time.monotonic() - started
    emit(event, payload)
