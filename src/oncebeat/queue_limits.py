"""A queue's concurrency limit: at most N of its jobs running at once, over every worker, process and host.

A worker's ``--concurrency`` bounds what one process runs; a limit bounds a queue for the whole deployment (the
relay allows 4 connections, the team's API 10 requests at a time), as Sidekiq Enterprise's and Oban's queue limits
do. It is set and changed at run time, without a restart (``oncebeat queues limit NAME N``, the dashboard's Queues
page), and held by the database (engine migration 0012, ``queue_limits``): a claim of a limited queue locks the
queue's limit, counts its running jobs and takes at most the difference (:meth:`oncebeat.queue.Queue.claim`), so
two workers never both take the last free slot. A claim that has not yet read a new limit takes nothing from that
queue (the claim statement checks), so a limit holds from its commit on.

Lowering a limit stops no running job: the queue takes nothing more until its running jobs fall under the new
limit. A job whose worker died counts as running until its lease expires and the rescue returns it.

Example::

    set_queue_limit(store, "mail", 4, source=current_source("api"), clock=SystemClock())  # 4 at once, everywhere
    clear_queue_limit(store, "mail", source=current_source("api"), clock=SystemClock())   # no limit again
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from . import audit
from .errors import OncebeatError
from .pauses import check_queue_name
from .provenance import Source
from .store import Store, Tx
from .timebase import Clock

__all__ = ["MAX_LIMIT", "clear_queue_limit", "queue_limits", "set_queue_limit"]

#: The largest limit accepted (a worker process runs at most a few hundred jobs at once; this is many hosts' worth).
MAX_LIMIT = 100_000


def queue_limits(db: Store | Tx) -> dict[str, dict[str, Any]]:
    """The limited queues: name -> row ``max_running, set_at`` (aware UTC) and the provenance of the change
    (``source_kind, source_host, source_pid, source_name, source_version``)."""
    return {str(r["queue"]): r for r in db.read("list_queue_limits")}


def set_queue_limit(store: Store, queue: str, max_running: int, *, source: Source, clock: Clock,
                    tx: Tx | None = None) -> int | None:
    """Let at most ``max_running`` jobs of ``queue`` run at once, summed over every worker, from the commit on.

    Audited ``queue.limited`` (with the operator, the old and the new limit).

    ``tx``: in the caller's transaction (the HTTP API's, with its idempotency key); default its own.

    Returns:
        The limit before (None: the queue had none).
    Raises:
        OncebeatError: ``queue`` cannot name a queue; ``max_running`` is not a whole number from 1 to
            :data:`MAX_LIMIT` (to stop a queue, pause it).
    """
    check_queue_name(queue)
    if isinstance(max_running, bool) or not isinstance(max_running, int) or not 1 <= max_running <= MAX_LIMIT:
        raise OncebeatError(f"a queue's limit is a whole number of jobs from 1 to {MAX_LIMIT}, not {max_running!r}; "
                            f"to stop a queue, pause it (`oncebeat queues pause {queue}`)")
    now = clock.now()
    with nullcontext(tx) if tx is not None else store.transaction() as tx:
        before = tx.run("get_queue_limit", queue=queue)
        old = int(before[0]["max_running"]) if before else None
        if old == max_running:
            return old
        tx.run("set_queue_limit", queue=queue, max_running=max_running, now=now, **source.params())
        audit.record(tx, now=now, kind="queue.limited", subject=f"queue:{queue}", source=source,
                     detail={"max_running": max_running, "before": old})
    return old


def clear_queue_limit(store: Store, queue: str, *, source: Source, clock: Clock,
                      tx: Tx | None = None) -> int | None:
    """Lift ``queue``'s limit: its workers' own concurrency is all that bounds it again.

    Audited ``queue.unlimited`` (with the limit lifted). Returns the limit lifted (None: there was none, nothing
    changed, nothing audited).

    ``tx``: in the caller's transaction (the HTTP API's, with its idempotency key); default its own.

    Raises:
        OncebeatError: ``queue`` cannot name a queue.
    """
    check_queue_name(queue)
    now = clock.now()
    with nullcontext(tx) if tx is not None else store.transaction() as tx:
        row = tx.one("clear_queue_limit", queue=queue)
        if row is None:
            return None
        old = int(row["max_running"])
        audit.record(tx, now=now, kind="queue.unlimited", subject=f"queue:{queue}", source=source,
                     detail={"before": old})
    return old
