"""Pauses that hold work: a paused queue, and a paused schedule's queued runs.

A pause is a **hold**, never a loss. What it holds stays in the ``jobs`` table as it was (state, ``run_at``,
attempts); no row is rewritten on pause or resume, so nothing can be dropped or duplicated by either:

- **a paused queue** (``paused_queues``, engine migration 0009) is not claimed by any worker, in any process,
  until it is resumed. Its jobs may still be enqueued (they wait);
- **a paused schedule** (``schedules.state = 'paused'``, ``oncebeat schedules pause KEY``) records its
  occurrences ``paused`` (the clock enqueues nothing for them) and holds its **runs not yet started**: a job whose
  ``run_of`` is one of its occurrences (enqueued before the pause, e.g. by a clock while no worker was up, or by a
  trigger or re-run) is not claimed until the schedule is resumed.

Both rules live in the claim statement (``claim_jobs``), which reads the pauses in the same statement that takes
the lease: a pause committed before a claim begins is seen by it, on every process and host. A job already
running when the pause commits is not stopped (it ends as usual; a claim that began before the pause committed may
still take one); jobs that a run enqueues (a scan's send jobs) are not runs and are held only by their queue's
pause.

Resume releases everything held, at once and unchanged: each held run runs **once** (it was enqueued before the
pause and stays the one run of its occurrence, G1), however far its occurrence now lies behind, because the
catch-up policy and ``catchup_window`` decide which occurrences get a run, and this one already had it. Nothing
bursts: the occurrences that fell during a schedule's pause are recorded ``paused`` and get no run.

Example::

    pause_queue(store, "mail", source=current_source("api"), clock=SystemClock())   # workers stop taking "mail"
    [h.describe() for h in held_jobs(store)]   # ['queue mail paused']
    resume_queue(store, "mail", source=current_source("api"), clock=SystemClock())
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import audit
from .errors import OncebeatError
from .provenance import Source
from .store import Store, Tx
from .timebase import Clock

__all__ = ["Held", "QueueStatus", "held_jobs", "pause_queue", "resume_queue", "paused_queues", "queue_overview",
           "check_queue_name", "QUEUE_NAME_MAX"]

QUEUE_NAME_MAX = 200


@dataclass(frozen=True, kw_only=True, slots=True)
class Held:
    """Unclaimed jobs of ``queue`` a pause holds: ``n`` jobs, held because ``kind`` is ``queue`` (the queue
    ``name`` is paused) or ``schedule`` (they are runs of occurrences of the paused schedule ``name``). A run in a
    paused queue counts under its queue only."""

    kind: str
    name: str
    queue: str
    n: int

    def describe(self) -> str:
        """``queue Q paused`` or ``schedule K paused``: what an operator resumes to release them."""
        return f"{self.kind} {self.name} paused"


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueStatus:
    """One queue as :func:`queue_overview` reports it.

    Attributes:
        waiting: unclaimed jobs a worker may take (now or at their ``run_at``).
        running: jobs under a worker's lease (a pause does not stop them).
        held: unclaimed jobs a pause holds (the queue's own, or paused schedules' runs: ``held_by``).
        paused_at: when the queue was paused (aware UTC), None when it is not; ``paused_by`` who did it.
    """

    queue: str
    paused: bool
    waiting: int
    running: int
    held: int
    held_by: tuple[str, ...] = ()
    paused_at: datetime | None = None
    paused_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "paused": self.paused, "waiting": self.waiting, "running": self.running,
                "held": self.held, "held_by": list(self.held_by),
                "paused_at": self.paused_at.isoformat() if self.paused_at else None, "paused_by": self.paused_by}


def check_queue_name(name: str) -> str:
    """``name`` if it can name a queue; else OncebeatError saying what is wrong and the fix."""
    if not name or not name.strip():
        raise OncebeatError("queue name is empty; give the queue's name, e.g. `oncebeat queues pause default` "
                            "(`oncebeat queues` lists them)")
    if len(name) > QUEUE_NAME_MAX:
        raise OncebeatError(f"queue name is {len(name)} characters long (at most {QUEUE_NAME_MAX}); give the "
                            "queue's name (`oncebeat queues` lists them)")
    if not name.isprintable() or name != name.strip():
        raise OncebeatError(f"queue name {name.encode('unicode_escape').decode('ascii')!r} has spaces at its ends "
                            "or unprintable characters; give the queue's name as workers take it "
                            "(`oncebeat queues` lists them)")
    return name


def held_jobs(db: Store | Tx, *, schedule_key: str | None = None) -> list[Held]:
    """The unclaimed jobs a pause holds, per cause and queue, ordered by kind, name, queue.

    Args:
        schedule_key: only that schedule's runs (held by its own pause or by its queue's).
    """
    return [Held(kind=str(r["kind"]), name=str(r["name"]), queue=str(r["queue"]), n=int(r["n"]))
            for r in db.read("jobs_held", schedule_key=schedule_key)]


def paused_queues(db: Store | Tx) -> list[dict[str, Any]]:
    """The paused queues, by name: rows ``queue, paused_at`` (aware UTC) and the provenance of the pause
    (``source_kind, source_host, source_pid, source_name, source_version``)."""
    return db.read("list_paused_queues")


def pause_queue(store: Store, queue: str, *, source: Source, clock: Clock,
                tx: Tx | None = None) -> bool:
    """Pause ``queue``: from the commit on, no worker in any process claims its jobs (enqueueing goes on).

    Running jobs are not stopped. Audited ``queue.paused`` (with the operator, and how many jobs it holds now).

    ``tx``: in the caller's transaction (the HTTP API's, with its idempotency key); default its own.

    Returns:
        False when the queue was already paused (nothing changed, nothing audited).
    Raises:
        OncebeatError: ``queue`` cannot name a queue (empty, too long, unprintable).
    """
    check_queue_name(queue)
    now = clock.now()
    with nullcontext(tx) if tx is not None else store.transaction() as tx:
        if tx.one("pause_queue", queue=queue, now=now, **source.params()) is None:
            return False
        held = sum(h.n for h in held_jobs(tx) if h.kind == "queue" and h.name == queue)
        audit.record(tx, now=now, kind="queue.paused", subject=f"queue:{queue}", source=source,
                     detail={"held": held})
    return True


def resume_queue(store: Store, queue: str, *, source: Source, clock: Clock,
                 tx: Tx | None = None) -> bool:
    """Resume ``queue``: its held jobs become claimable at once, each as it was (no job is added or repeated).

    Audited ``queue.resumed`` (with the operator, and how many jobs it releases).

    ``tx``: in the caller's transaction (the HTTP API's, with its idempotency key); default its own.

    Returns:
        False when the queue was not paused (nothing changed, nothing audited).
    Raises:
        OncebeatError: ``queue`` cannot name a queue.
    """
    check_queue_name(queue)
    now = clock.now()
    with nullcontext(tx) if tx is not None else store.transaction() as tx:
        released = sum(h.n for h in held_jobs(tx) if h.kind == "queue" and h.name == queue)
        if tx.one("resume_queue", queue=queue) is None:
            return False
        audit.record(tx, now=now, kind="queue.resumed", subject=f"queue:{queue}", source=source,
                     detail={"released": released})
    return True


def queue_overview(db: Store | Tx, *, known: tuple[str, ...] = ()) -> list[QueueStatus]:
    """Every queue with unfinished jobs, every paused queue and each of ``known`` (e.g. the app's task queues),
    by name: waiting, running and held job counts and the pause (see :class:`QueueStatus`)."""
    counts = {str(r["queue"]): (int(r["running"]), int(r["unclaimed"])) for r in db.read("queue_job_counts")}
    paused = {str(r["queue"]): r for r in paused_queues(db)}
    held: dict[str, list[Held]] = {}
    for h in held_jobs(db):
        held.setdefault(h.queue, []).append(h)
    out = []
    for name in sorted(set(counts) | set(paused) | set(known)):
        running, unclaimed = counts.get(name, (0, 0))
        holds = held.get(name, [])
        n_held = sum(h.n for h in holds)
        p = paused.get(name)
        out.append(QueueStatus(queue=name, paused=p is not None, waiting=unclaimed - n_held, running=running,
                               held=n_held, held_by=tuple(h.describe() for h in holds),
                               paused_at=p["paused_at"] if p else None,
                               paused_by=f"{p['source_kind']} {p['source_name']} on {p['source_host']}" if p else None))
    return out
