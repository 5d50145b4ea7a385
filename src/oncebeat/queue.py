"""The durable job queue: enqueue, claim with a lease, heartbeat, complete, retry, rescue, cancel.

Job states (the field's usual names):

- ``available`` — runnable now; ``scheduled`` — runnable at ``run_at``;
- ``running`` — claimed by a worker holding a lease until ``lease_expires_at``;
- ``retryable`` — failed, waits for its backoff (``run_at``);
- ``completed``, ``discarded`` (permanent error or attempts exhausted, error
  kept), ``cancelled`` (by a person) — final;
- ``in_doubt`` — the handler ran to its end but some of its effects are in
  doubt (their keys are in the last error entry); it waits for an operator's
  ``effects resolve KEY done|not_done``, then ends ``completed`` or runs again.

Guarantees: a job is never silently dropped (G3). A worker that dies stops
renewing its lease; :meth:`Queue.rescue` puts the job back (``available``)
with the lease error recorded, or discards it when attempts are exhausted.
Every attempt's error is kept in ``errors`` (a JSON list).

Fencing: a lease that has expired is never renewed (:meth:`Queue.extend_leases`
tells the worker which jobs it still holds), and completing, failing or
returning a job checks that the worker (and for a failure the attempt) still
holds it, so a worker that was frozen past its lease records nothing on work
that has moved on.

Example::

    q = Queue(store, clock=SystemClock(), source=current_source("api"))
    with store.transaction() as tx:
        tx.execute("UPDATE invoices SET status = 'void' WHERE id = :id", {"id": 7})
        q.enqueue("notify_void", {"invoice_id": 7}, tx=tx)   # commits with the update
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from . import audit, telemetry
from .app import App
from .errors import OncebeatError, RunUnfinished, UniqueConflict
from .pauses import Held, held_jobs
from .provenance import Source
from .store import Json, Store, Tx
from .store.base import instant_text
from .timebase import Clock, require_aware

__all__ = ["Job", "JobRecord", "Queue", "backoff_seconds", "job_row", "all_jobs", "jobs_in_doubt", "rerun_in_doubt",
           "copy_job", "close_in_doubt", "unfinished_run", "other_unfinished_run", "JOB_STATES",
           "UNFINISHED_STATES", "ONE_RUN_INDEX", "HELD_UNTIL", "LeftBehind"]

JOB_STATES = ("available", "scheduled", "running", "retryable", "completed", "discarded", "cancelled", "in_doubt")
UNFINISHED_STATES = ("available", "scheduled", "running", "retryable")
HELD_UNTIL = datetime(2999, 1, 1, tzinfo=UTC)  # run_at of a run held by overlap buffer_one until released
#: The partial unique index (engine migration 0008) admitting one unfinished job per occurrence served (run_of).
ONE_RUN_INDEX = "jobs_one_run_per_occurrence"
#: Seconds between two reads of the limited queues by one Queue (a worker's): a new limit holds at once (a claim
#: that has not read it takes nothing from its queue) and is served by this worker within this time.
LIMITS_TTL = 2.0


@dataclass(frozen=True, kw_only=True, slots=True)
class LeftBehind:
    """What a burst worker could not take: jobs under other workers' leases, and jobs due later (UTC instants).

    Attributes:
        leased: jobs running under another worker's lease; ``leased_until`` the last of those leases' ends
            (a live worker renews it; a dead one's job is rescued after it).
        later: unclaimed jobs due after now (retries with backoff, jobs enqueued for later); ``later_from`` the
            first one's ``run_at``. Runs held by overlap ``buffer_one`` are not counted, nor jobs a pause holds.
        held: the jobs a pause holds (a paused queue, a paused schedule's runs), per cause and queue: they wait
            for a resume, not for a worker.
    """

    leased: int = 0
    leased_from: datetime | None = None
    leased_until: datetime | None = None
    later: int = 0
    later_from: datetime | None = None
    held: tuple[Held, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """A claimed job: what running it needs (a handler's ``ctx.job``). Instants are aware UTC datetimes.

    ``state``, ``worker_id`` and ``lease_expires_at`` are the claim's own (``running``, the claiming worker,
    the lease it took); the rest is read from the row. The job's history (``errors``, ``created_at``,
    ``started_at``, ``finished_at``) is not read by a claim (a JSON list and three instants to send and decode per
    row, which running a job never needs): :meth:`Queue.get` returns it, as a :class:`JobRecord`.
    """

    id: int
    queue: str
    task: str
    args: dict[str, Any]
    state: str
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    lease_expires_at: datetime | None
    worker_id: int | None
    occurrence_id: int | None
    unique_key: str | None
    source_kind: str
    source_host: str
    source_pid: int
    source_name: str
    source_version: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Self:
        """Build from a ``jobs`` row holding at least this class's fields (extra columns are ignored)."""
        return cls(**{f.name: row[f.name] for f in fields(cls)})


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRecord(Job):
    """A whole ``jobs`` row (:meth:`Queue.get`): a :class:`Job` with its history."""

    errors: list[dict[str, Any]]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


# Job's fields with their slot setters, in field order. A frozen dataclass's __init__ sets each field through
# object.__setattr__ (a global lookup and a call per field): 7-10 us per Job on the bench machine against 4-5 us for
# the slot setters, a tenth of a drained job's CPU in the worker (docs/benchmarks.md, round 3b).
_JOB_SLOTS = tuple((f.name, getattr(Job, f.name).__set__) for f in fields(Job))
_new_job = object.__new__


def _claimed_job(row: dict[str, Any], lease: datetime, worker_id: int) -> Job:
    """The :class:`Job` a claim hands out: ``row`` (a ``claim_jobs`` row) with the claim's own state, lease and
    worker; ``row`` is updated with those three. The same object ``Job(**fields)`` would build, faster."""
    row["state"], row["lease_expires_at"], row["worker_id"] = "running", lease, worker_id
    job: Job = _new_job(Job)
    for name, put in _JOB_SLOTS:
        put(job, row[name])
    return job


def backoff_seconds(attempt: int, *, base: float = 2.0, cap: float = 3600.0, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: ``base * 2**(attempt-1)`` capped at ``cap``, times 0.8–1.2.

    Args:
        attempt: the attempt that just failed (1 for the first).
    Returns:
        Seconds to wait before the next attempt.
    """
    raw = min(cap, base * (2 ** max(0, attempt - 1)))
    return float(raw * (rng or random).uniform(0.8, 1.2))


def job_row(db: Store | Tx, job_id: int) -> dict[str, Any] | None:
    """The ``jobs`` row ``job_id`` (every column, ``errors`` decoded), or None; in ``db``'s transaction if a Tx."""
    rows = db.read("get_job", id=job_id)
    return rows[0] if rows else None


def all_jobs(db: Store | Tx, *, state: str | None = None, task: str | None = None,
             limit: int = 10_000_000) -> list[dict[str, Any]]:
    """Whole ``jobs`` rows (``errors`` included), newest first, optionally of one ``state`` and/or ``task``.

    For checks over a whole run (the simulator's checker); pages for people come from :meth:`Queue.list_jobs`.
    """
    return db.read("list_jobs", state=state, task=task, limit=limit)


def jobs_in_doubt(db: Store | Tx) -> list[dict[str, Any]]:
    """Whole rows of the jobs in state ``in_doubt`` (an effect of theirs awaits an operator), by id."""
    return db.read("jobs_in_doubt")


def rerun_in_doubt(tx: Tx, job_id: int, *, now: datetime, entry: dict[str, Any]) -> bool:
    """Make in-doubt job ``job_id`` available again now with one more attempt allowed; ``entry`` is appended
    to its errors. Returns False (nothing changed) if it is not in doubt, or another unfinished job holds its
    unique key (that one will run the effect)."""
    return tx.one("job_rerun", id=job_id, from_state="in_doubt", now=now, entry=Json(entry)) is not None


def copy_job(tx: Tx, job_id: int, *, now: datetime, source: Source) -> int | None:
    """Enqueue a fresh job with finished job ``job_id``'s task, arguments and options; return its id.

    A copy of an occurrence's run is a run of it too. None when ``job_id`` does not exist, or an unfinished job
    holds its unique key or is a run of its occurrence.
    """
    row = tx.one("job_copy", id=job_id, now=now, **source.params())
    return int(row["id"]) if row else None


def unfinished_run(db: Store | Tx, occurrence_id: int) -> dict[str, Any] | None:
    """The unfinished run ``{id, state}`` serving occurrence ``occurrence_id`` (at most one), or None."""
    rows = db.read("unfinished_run_of", run_of=occurrence_id)
    return rows[0] if rows else None


def other_unfinished_run(db: Store | Tx, job_id: int) -> dict[str, Any] | None:
    """The unfinished run ``{id, state, run_of}`` of the occurrence job ``job_id`` serves, other than ``job_id``
    itself (``run_of`` is that occurrence), or None: what a retry of ``job_id`` would run beside."""
    rows = db.read("other_unfinished_run", id=job_id)
    return rows[0] if rows else None


def close_in_doubt(tx: Tx, job_id: int, *, now: datetime, entry: dict[str, Any]) -> bool:
    """End in-doubt job ``job_id`` as completed (every in-doubt effect of it resolved); ``entry`` is appended to
    its errors. Returns False if it is not in doubt."""
    return tx.one("job_close_in_doubt", id=job_id, now=now, entry=Json(entry)) is not None


class Queue:
    """Queue operations on a store. Thread-safe (each call opens its own transaction unless given ``tx``)."""

    def __init__(self, store: Store, *, clock: Clock, source: Source, rng: random.Random | None = None,
                 app: App | None = None) -> None:
        self.store = store
        self.clock = clock
        self.source = source
        self.rng = rng or random.Random()
        self.app = app  # when given: task names are checked and each task's defaults apply
        # The limited queues as last read (engine migration 0012) and when (this queue's clock): re-read inside a
        # claim every LIMITS_TTL seconds. A stale read cannot pass a new limit (claim_jobs checks the table). The
        # injected clock, not the host's monotonic one: on simulated time the re-reads, and so the statements a
        # simulation runs (each may draw a fault), no longer depend on how fast the host ran it.
        self._limited: frozenset[str] = frozenset()
        self._limits_read_at: datetime | None = None

    def enqueue(self, task: str, args: dict[str, Any] | None = None, *, tx: Tx | None = None,
                queue: str | None = None, priority: int | None = None, run_at: datetime | None = None,
                max_attempts: int | None = None, unique_key: str | None = None, occurrence_id: int | None = None,
                source: Source | None = None) -> int | None:
        """Insert a job; return its id, or None when ``unique_key`` is held by an unfinished job.

        Args:
            task: registered task name.
            args: JSON-serialisable keyword arguments for the handler.
            tx: enqueue inside the caller's transaction (commits or rolls back with it).
            run_at: aware instant; default now. A future instant makes the job ``scheduled``.
            max_attempts: attempts before the job is ``discarded`` (>= 1).
            unique_key: at most one unfinished job per key (partial unique index).
            occurrence_id: the occurrence this job comes from (provenance). Only the job the ledger links to
                the occurrence (``oncebeat.ledger.set_occurrence_job``) is its run, of which at most one is
                unfinished; jobs a task enqueues carrying the id are not limited.

        ``queue``, ``priority`` and ``max_attempts`` default to the task's own (``@app.task(...)``) when
        this queue knows the app, else to "default", 0 and 20.

        Raises:
            ValueError: the app does not define ``task``, or ``max_attempts`` < 1.
        """
        queue, priority, max_attempts = self._defaults(task, queue, priority, max_attempts)
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        now = self.clock.now()
        when = require_aware(run_at, "run_at") if run_at is not None else now
        row = {
            "queue": queue, "task": task, "args": Json(args or {}), "priority": priority,
            "state": "scheduled" if when > now else "available", "max_attempts": max_attempts,
            "run_at": when, "unique_key": unique_key, "occurrence_id": occurrence_id, "now": now,
            **(source or self.source).params(),
        }
        if tx is not None:
            got = tx.one("insert_job", **row)
        else:
            with self.store.transaction() as own:
                got = own.one("insert_job", **row)
        return int(got["id"]) if got else None

    def _defaults(self, task: str, queue: str | None, priority: int | None,
                  max_attempts: int | None) -> tuple[str, int, int]:
        definition = None
        if self.app is not None:
            definition = self.app.tasks.get(task)
            if definition is None:
                known = ", ".join(sorted(self.app.tasks)) or "none"
                raise ValueError(f"no task named {task!r} is registered (known: {known})")
        return (queue if queue is not None else definition.queue if definition else "default",
                priority if priority is not None else definition.priority if definition else 0,
                max_attempts if max_attempts is not None else definition.max_attempts if definition else 20)

    def enqueue_select(self, tx: Tx, source: str, *, task: str, queue: str | None = None,
                       priority: int | None = None, max_attempts: int | None = None, **params: Any) -> int:
        """Enqueue one ``task`` job, available now, per row of another layer's named SELECT ``source``.

        Set-based (one statement, in the caller's transaction ``tx``), so an app enqueues thousands of jobs
        without writing the queue's SQL. ``source`` selects ``args`` (a JSON object), ``unique_key`` (or
        NULL) and ``occurrence_id`` (or NULL); ``params`` are its parameters. All jobs get this queue's
        provenance; ``queue``, ``priority`` and ``max_attempts`` default as in :meth:`enqueue`.

        Returns:
            The number of jobs inserted (a row whose unique key an unfinished job holds is skipped).
        Raises:
            ValueError: the app does not define ``task``, or ``max_attempts`` < 1.
            StoreError: no registered SQL line defines ``source``.
        """
        return len(self.enqueue_select_returning(tx, source, task=task, queue=queue, priority=priority,
                                                 max_attempts=max_attempts, **params))

    def enqueue_select_returning(self, tx: Tx, source: str, *, task: str, queue: str | None = None,
                                 priority: int | None = None, max_attempts: int | None = None,
                                 **params: Any) -> list[tuple[int, int | None]]:
        """:meth:`enqueue_select`, returning ``(job id, occurrence id or None)`` of each job inserted.

        For a caller that links each job to its source row in the same transaction (the clock's set-based fire
        no longer does: :meth:`enqueue_runs_select` inserts its runs under ids drawn beforehand).
        Raises as :meth:`enqueue_select`.
        """
        queue, priority, max_attempts = self._defaults(task, queue, priority, max_attempts)
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        rows = tx.run_with("enqueue_select", source, queue=queue, task=task, priority=priority,
                           max_attempts=max_attempts, now=self.clock.now(), **self.source.params(), **params)
        return [(int(r["id"]), None if r["occurrence_id"] is None else int(r["occurrence_id"])) for r in rows]

    def enqueue_runs_select(self, tx: Tx, source: str, *, task: str, queue: str | None = None,
                            priority: int | None = None, max_attempts: int | None = None,
                            **params: Any) -> list[tuple[int, int]]:
        """Insert the runs of just-recorded occurrences, each under the job id its occurrence already names.

        The clock's set-based fire draws each run's job id from the jobs' id sequence when it inserts the
        occurrence, so the occurrence and its run point at each other from their inserts (no update of either).
        ``source`` selects ``id`` (that job id), ``args`` (a JSON object), ``unique_key`` (or NULL),
        ``occurrence_id`` and ``run_of`` (the occurrence the job runs); defaults as in :meth:`enqueue`.

        Returns:
            ``(job id, run_of)`` of each job inserted (one per source row).
        Raises:
            As :meth:`enqueue_select`; also StoreError when a row's id, ``run_of`` or unique key is already taken
            (a plain insert, no skip: the ids were just drawn and the occurrences just inserted in ``tx``, so only a
            broken database conflicts; the caller's transaction rolls back).
        """
        queue, priority, max_attempts = self._defaults(task, queue, priority, max_attempts)
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        rows = tx.run_with("enqueue_runs_select", source, queue=queue, task=task, priority=priority,
                           max_attempts=max_attempts, now=self.clock.now(), **self.source.params(), **params)
        return [(int(r["id"]), int(r["run_of"])) for r in rows]

    def enqueue_many(self, jobs: Sequence[dict[str, Any]], *, tx: Tx | None = None) -> int:
        """Insert many jobs with one statement; each dict takes :meth:`enqueue`'s keywords (``task`` required).

        Each row is the job :meth:`enqueue` would insert with the same keywords (the same defaults, state and
        run_at); all rows get this queue's provenance and one ``created_at``. One round of Python per row: the
        task defaults are resolved once per distinct (task, queue, priority, max_attempts), and a job without
        ``run_at`` is sent without one (the statement puts ``now`` there).

        Returns:
            The number of jobs submitted (a row whose unique key an unfinished job, or an earlier row of the
            same call, holds is skipped silently).
        Raises:
            ValueError: the app does not define a task, a ``max_attempts`` < 1, or a naive ``run_at``.
        """
        now = self.clock.now()
        options: dict[tuple[Any, ...], tuple[str, int, int]] = {}
        rows = []
        keyed = False
        for j in jobs:
            task = j["task"]
            key = (task, j.get("queue"), j.get("priority"), j.get("max_attempts"))
            resolved = options.get(key)
            if resolved is None:
                resolved = options[key] = self._defaults(*key)
                if resolved[2] < 1:
                    raise ValueError("max_attempts must be >= 1")
            when, unique_key = j.get("run_at"), j.get("unique_key")
            keyed = keyed or unique_key is not None
            rows.append([resolved[0], task, j.get("args") or {}, resolved[1], resolved[2],
                         None if when is None else instant_text(when), unique_key, j.get("occurrence_id")])
        # Without a unique key nothing can conflict (ids come from the table's sequence), and a plain INSERT spares
        # PostgreSQL the speculative insertion ON CONFLICT costs per row.
        name = "insert_jobs_bulk" if keyed else "insert_jobs_bulk_unkeyed"
        params = {"rows": Json(rows), "now": now, **self.source.params()}
        if tx is not None:
            tx.run(name, **params)
        else:
            with self.store.transaction() as own:
                own.run(name, **params)
        return len(rows)

    def claim(self, worker_id: int, *, queues: Sequence[str] = ("default",), limit: int = 10,
              lease_seconds: float = 30.0, complete: Sequence[int] = ()) -> list[Job]:
        """Claim up to ``limit`` due jobs (priority, then run_at, then id) with a lease of ``lease_seconds``.

        ``queues`` are served in the order given: a later queue gets what the earlier ones leave of ``limit``.
        A paused queue yields nothing, and a run of a paused schedule's occurrence is passed over
        (:mod:`oncebeat.pauses`): the claim statement reads the pauses, so every process sees one committed
        before its claim began. A limited queue (:mod:`oncebeat.queue_limits`) yields at most its free slots
        (its limit less its running jobs, over every worker), counted under a lock on its limit; a limit set
        since this object last read them (every :data:`LIMITS_TTL` seconds) yields nothing until it is read.

        Args:
            complete: ids of jobs this worker finished, marked ``completed`` in the same
                transaction (one commit per batch instead of two).
        """
        now = self.clock.now()
        lease = now + timedelta(seconds=lease_seconds)
        rows: list[dict[str, Any]] = []
        # generic_plans: claim_jobs walks jobs_fetch in order whatever its values, so it is planned once per
        # connection instead of per claim (the custom plan cost ~0.3 ms of a 100-job claim's ~1.3 ms).
        with self.store.transaction(bounded=True, generic_plans=True) as tx:
            if complete:
                tx.run("complete_jobs", worker_id=worker_id, ids=list(complete), now=now)
            read_at = self._limits_read_at  # a clock stepped back re-reads too
            if read_at is None or not 0 <= (now - read_at).total_seconds() < LIMITS_TTL:
                self._limited = frozenset(str(r["queue"]) for r in tx.run("queue_limit_names"))
                self._limits_read_at = now
            for name in queues:  # queues are served in the order given
                take, capped = limit - len(rows), 0
                if name in self._limited:  # at most its free slots, counted under the queue's lock
                    locked = tx.run("lock_queue_limit", queue=name)
                    if locked:
                        running = int(tx.run("running_in_queue", queue=name)[0]["n"])
                        take, capped = min(take, int(locked[0]["max_running"]) - running), 1
                if take > 0:
                    rows += tx.run("claim_jobs", worker_id=worker_id, queue=name, limit=take, now=now,
                                   lease_expires_at=lease, capped=capped)
                if len(rows) >= limit:
                    break
        # The claim returns only what running a job needs; state, worker and lease are the claim's own.
        jobs = [_claimed_job(r, lease, worker_id) for r in rows]
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
        return jobs

    def extend_leases(self, worker_id: int, ids: Sequence[int], *, lease_seconds: float = 30.0) -> dict[int, int]:
        """Heartbeat and fencing check: renew the leases of ``ids`` still held by ``worker_id`` (now + lease).

        Only a running job whose lease has not expired is renewed: an expired lease belongs to the rescue
        even before it ran (fencing). Returns ``{job id: attempt}`` of the jobs renewed — the ones this
        worker still holds; an id missing from it is lost (the caller must not start or go on with it).
        """
        if not ids:
            return {}
        now = self.clock.now()
        with self.store.transaction() as tx:
            rows = tx.run("extend_leases", worker_id=worker_id, ids=list(ids), now=now,
                          lease_expires_at=now + timedelta(seconds=lease_seconds))
        return {int(r["id"]): int(r["attempt"]) for r in rows}

    def complete(self, worker_id: int, ids: Sequence[int]) -> None:
        """Mark jobs ``completed`` in one statement (only those still running under ``worker_id``)."""
        if not ids:
            return
        with self.store.transaction() as tx:
            tx.run("complete_jobs", worker_id=worker_id, ids=list(ids), now=self.clock.now())

    def fail(self, job: Job, worker_id: int, error: str, *, permanent: bool = False,
             delay: float | None = None, kind: str = "error") -> str:
        """Record a failed attempt; return the new state (``retryable``, ``discarded``, or ``lost-lease``: not held).

        Args:
            error: what went wrong (kept in ``errors`` with the attempt number and instant).
            permanent: discard at once (no retry can help).
            delay: seconds until the retry; default :func:`backoff_seconds`.
        """
        now = self.clock.now()
        give_up = permanent or job.attempt >= job.max_attempts
        state = "discarded" if give_up else "retryable"
        wait = delay if delay is not None else backoff_seconds(job.attempt, rng=self.rng)
        entry = {"attempt": job.attempt, "at": now.isoformat(), "error": error[:2000], "kind": kind}
        with self.store.transaction() as tx:
            row = tx.one("fail_job", id=job.id, worker_id=worker_id, attempt=job.attempt, state=state,
                         run_at=now if give_up else now + timedelta(seconds=wait),
                         finished_at=now if give_up else None, error=Json(entry))
            if row is None:
                state = "lost-lease"
            else:
                audit.record(tx, now=now, kind="job.discarded" if give_up else "job.retried",
                             subject=f"job:{job.id}", source=self.source, process_id=worker_id,
                             detail={"task": job.task, "attempt": job.attempt, "error": error[:500],
                                     "permanent": permanent, "retry_in": None if give_up else round(wait, 3)})
        telemetry.emit("job.failed", {"task": job.task, "queue": job.queue, "attempt": job.attempt, "state": state,
                                      "kind": kind})
        return state

    def snooze(self, job: Job, worker_id: int, reason: str, *, delay: float) -> str:
        """Put a running job back ``retryable`` in ``delay`` seconds without using up an attempt.

        The attempt is kept in ``errors`` (kind ``snooze``) and ``max_attempts`` grows by one, so the attempts
        left are unchanged and attempt numbers never repeat (an effect's holder stays unique). Not audited per
        snooze (an outage would write one event per job and try); the job's errors are the record.

        Returns:
            ``retryable``, or ``lost-lease`` if this worker no longer holds the job.
        """
        now = self.clock.now()
        entry = {"attempt": job.attempt, "at": now.isoformat(), "error": reason[:2000], "kind": "snooze",
                 "retry_in": round(delay, 3)}
        with self.store.transaction() as tx:
            row = tx.one("snooze_job", id=job.id, worker_id=worker_id, attempt=job.attempt,
                         run_at=now + timedelta(seconds=delay), error=Json(entry))
        state = "retryable" if row is not None else "lost-lease"
        telemetry.emit("job.failed", {"task": job.task, "queue": job.queue, "attempt": job.attempt, "state": state,
                                      "kind": "snooze"})
        return state

    def hold_in_doubt(self, job: Job, worker_id: int, keys: Sequence[str]) -> str:
        """End an attempt whose effects ``keys`` are in doubt: the job waits ``in_doubt`` for an operator.

        Returns ``in_doubt``, or ``lost-lease`` if this worker no longer holds the job.
        """
        now = self.clock.now()
        error = (f"{len(keys)} effect(s) in doubt: {', '.join(keys)}; the job's other effects ran. Resolve each "
                 "with `oncebeat effects resolve KEY done|not_done`")
        entry = {"attempt": job.attempt, "at": now.isoformat(), "error": error[:2000], "kind": "in_doubt",
                 "keys": list(keys)}
        with self.store.transaction() as tx:
            row = tx.one("fail_job", id=job.id, worker_id=worker_id, attempt=job.attempt, state="in_doubt",
                         run_at=now, finished_at=now, error=Json(entry))
            if row is None:
                return "lost-lease"
            audit.record(tx, now=now, kind="job.in_doubt", subject=f"job:{job.id}", source=self.source,
                         process_id=worker_id, detail={"task": job.task, "attempt": job.attempt, "keys": list(keys)})
        return "in_doubt"

    def return_jobs(self, worker_id: int, ids: Sequence[int]) -> list[int]:
        """Give running jobs back to the queue without burning an attempt (graceful shutdown)."""
        if not ids:
            return []
        now = self.clock.now()
        with self.store.transaction() as tx:
            rows = tx.run("return_jobs", worker_id=worker_id, ids=list(ids))
            if rows:
                audit.record(tx, now=now, kind="job.returned", subject=f"worker:{worker_id}", source=self.source,
                             process_id=worker_id, detail={"jobs": [r["id"] for r in rows]})
        return [int(r["id"]) for r in rows]

    def rescue(self, *, limit: int = 1000) -> list[dict[str, Any]]:
        """Put back jobs whose lease expired (their worker died); discard those out of attempts.

        Returns rows ``{id, state, attempt, worker_id, task}`` of the rescued jobs.
        """
        now = self.clock.now()
        with self.store.transaction() as tx:
            rows = tx.run("rescue_jobs", now=now, limit=limit)
            for r in rows:
                audit.record(tx, now=now, kind="job.rescued", subject=f"job:{r['id']}",
                             source=self.source.with_kind("rescue"),
                             detail={"task": r["task"], "attempt": r["attempt"], "dead_worker": r["worker_id"],
                                     "new_state": r["state"]})
        if rows:
            telemetry.emit("job.rescued", {"count": len(rows), "jobs": [{"id": r["id"], "task": r["task"],
                                                                         "state": r["state"]} for r in rows]})
        return rows

    def cancel(self, job_id: int) -> bool:
        """Cancel a job that is not running or finished; True if it was cancelled."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            ok = tx.one("cancel_job", id=job_id, now=now) is not None
            if ok:
                audit.record(tx, now=now, kind="job.cancelled", subject=f"job:{job_id}", source=self.source)
        return ok

    def retry(self, job_id: int) -> bool:
        """An operator's retry: a ``discarded``, ``cancelled``, ``retryable`` or ``scheduled`` job becomes
        ``available`` now, allowed one more attempt than it has used; its errors are kept. Audited ``job.retried``.

        Returns:
            True if the job was put back; False if it is unknown, running or completed.
        Raises:
            RunUnfinished: another run of the job's occurrence (a re-run, a copy) is unfinished; the message names
                it (retrying would serve the occurrence twice).
            OncebeatError: another unfinished job holds the same unique key (retrying would run it twice).
        """
        now = self.clock.now()
        try:
            with self.store.transaction() as tx:
                row = tx.one("retry_job", id=job_id, now=now)
                if row is not None:
                    audit.record(tx, now=now, kind="job.retried", subject=f"job:{job_id}", source=self.source,
                                 detail={"by": "operator"})
        except UniqueConflict as exc:
            if exc.constraint != ONE_RUN_INDEX:
                raise OncebeatError(f"job {job_id} was not retried: another unfinished job holds its unique key"
                                    ) from exc
            other = other_unfinished_run(self.store, job_id)
            job = self.get(job_id)
            served = int(other["run_of"]) if other else (job.occurrence_id or 0) if job else 0
            raise RunUnfinished(served, None if other is None else int(other["id"]),
                                None if other is None else str(other["state"]), action=f"retry job {job_id}") from exc
        return row is not None

    def list_jobs(self, *, state: str | None = None, task: str | None = None, queue: str | None = None,
                  since: datetime | None = None, until: datetime | None = None, before_id: int | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Jobs newest first, filtered (each filter optional), ``limit`` per page.

        Keyset pagination: pass the last row's ``id`` as ``before_id``. ``since``/``until`` bound
        ``created_at`` (aware). Rows carry the job's columns without ``errors``, plus ``error_count``,
        ``last_error`` and ``held`` (``queue Q paused`` / ``schedule K paused`` for a waiting job a pause holds,
        else None).
        """
        return self.store.read("list_jobs_page", state=state, task=task, queue=queue,
                               since=require_aware(since, "since") if since else None,
                               until=require_aware(until, "until") if until else None,
                               before_id=before_id, limit=limit)

    def get(self, job_id: int) -> JobRecord | None:
        """Job ``job_id`` with its history and provenance, or None."""
        row = job_row(self.store, job_id)
        return JobRecord.from_row(row) if row else None

    def next_run_at(self, queues: Sequence[str] = ("default",)) -> datetime | None:
        """Earliest ``run_at`` of unfinished, unclaimed jobs in ``queues`` that a claim may take (None if none):
        a job a pause holds is left out (it is due only after a resume)."""
        rows = self.store.read("next_run_at", queues=list(queues))
        return rows[0]["run_at"] if rows else None

    def left_behind(self, worker_id: int, queues: Sequence[str] = ("default",)) -> LeftBehind:
        """The jobs of ``queues`` that worker ``worker_id`` cannot run now (see :class:`LeftBehind`)."""
        rows = {r["kind"]: r for r in self.store.read("jobs_left_behind", queues=list(queues), worker_id=worker_id,
                                                      now=self.clock.now(), held_until=HELD_UNTIL)}
        leased, later = rows.get("leased"), rows.get("later")
        held = tuple(h for h in held_jobs(self.store) if h.queue in queues)
        return LeftBehind(leased=int(leased["n"]) if leased else 0,
                          leased_from=leased["first_at"] if leased else None,
                          leased_until=leased["last_at"] if leased else None,
                          later=int(later["n"]) if later else 0, later_from=later["first_at"] if later else None,
                          held=held)

    def counts(self) -> dict[str, int]:
        """Jobs per state."""
        return {r["state"]: int(r["n"]) for r in self.store.read("count_jobs_by_state")}

    def counts_by_queue(self) -> list[dict[str, Any]]:
        """Unfinished jobs per queue and state: ``[{"queue", "state", "n"}]`` (reads only unfinished work)."""
        return [{"queue": r["queue"], "state": r["state"], "n": int(r["n"])}
                for r in self.store.read("count_unfinished_jobs_by_queue")]

    def counts_by_queue_capped(self, cap: int = 10_000) -> list[dict[str, Any]]:
        """Unfinished jobs per queue and state, each counted up to ``cap + 1``: ``[{"queue", "state", "n",
        "capped"}]``, ``capped`` True when there are more than ``cap`` (``n`` is then ``cap + 1``, a lower
        bound). Reads at most ``cap + 1`` index entries per queue and state whatever the backlog (the overview;
        :meth:`counts_by_queue` counts them all, for the gauges). Raises ValueError when ``cap`` < 1."""
        if cap < 1:
            raise ValueError(f"cap must be at least 1, not {cap}")
        return [{"queue": r["queue"], "state": r["state"], "n": int(r["n"]), "capped": int(r["n"]) > cap}
                for r in self.store.read("count_unfinished_jobs_capped", cap=cap + 1)]

    def counts_capped(self, cap: int = 10_000) -> dict[str, dict[str, Any]]:
        """Jobs per state, each counted up to ``cap + 1``: ``{state: {"n", "capped"}}`` for every state of
        :data:`JOB_STATES`, ``capped`` True when there are more than ``cap`` (``n`` is then ``cap + 1``, a lower
        bound). Reads at most ``cap + 1`` index entries per state (per queue and state for the unfinished ones)
        whatever the number of jobs (the job list; :meth:`counts` counts them all). Raises ValueError when
        ``cap`` < 1."""
        unfinished = self.counts_by_queue_capped(cap)
        totals = {state: 0 for state in JOB_STATES}
        for r in unfinished:
            totals[r["state"]] += r["n"]
        for r in self.store.read("count_finished_jobs_capped", cap=cap + 1):
            totals[r["state"]] = int(r["n"])
        return {state: {"n": min(n, cap + 1), "capped": n > cap} for state, n in totals.items()}

    def finished_histogram(self, since: datetime, bucket_seconds: int) -> list[dict[str, Any]]:
        """Jobs finished since ``since`` per ``bucket_seconds`` slot and final state.

        Returns ``[{"slot": int, "state": str, "n": int}]``; slot 0 starts at ``since`` (aware).
        """
        since = require_aware(since, "since")
        return [{"slot": int(r["slot"]), "state": r["state"], "n": int(r["n"])}
                for r in self.store.read("finished_jobs_histogram", since=since, bucket=bucket_seconds)]

    def task_stats(self, since: datetime) -> list[dict[str, Any]]:
        """Per task, the jobs finished since ``since`` (aware), by task name.

        Returns ``[{"task", "completed", "discarded", "cancelled", "in_doubt", "retries", "p50", "p95", "p99",
        "max"}]``: counts of jobs per final state, ``retries`` the attempts beyond each job's first, and the run
        time of the completed jobs' last attempt in seconds (float) at the 50th, 95th and 99th percentile by the
        nearest-rank method (an exact duration of one of them, never interpolated), and the longest; None when
        no job of the task completed.
        """
        out = []
        for r in self.store.read("task_stats", since=require_aware(since, "since")):
            row: dict[str, Any] = {"task": r["task"]}
            for name in ("completed", "discarded", "cancelled", "in_doubt", "retries"):
                row[name] = int(r[name] or 0)
            for name, col in (("p50", "p50"), ("p95", "p95"), ("p99", "p99"), ("max", "max_seconds")):
                row[name] = float(r[col]) if r[col] is not None else None
            out.append(row)
        return out

    def task_histogram(self, since: datetime, bucket_seconds: int) -> list[dict[str, Any]]:
        """Jobs finished since ``since`` (aware) per task, ``bucket_seconds`` slot and final state.

        Returns ``[{"task", "slot": int, "state", "n": int}]``; slot 0 starts at ``since``.
        """
        return [{"task": r["task"], "slot": int(r["slot"]), "state": r["state"], "n": int(r["n"])}
                for r in self.store.read("task_histogram", since=require_aware(since, "since"),
                                         bucket=bucket_seconds)]

    def depths(self) -> list[dict[str, Any]]:
        """Unclaimed jobs per queue now: ``[{"queue", "due", "later", "oldest_due_at"}]`` — ``due``: run_at
        reached (jobs a pause holds included), ``later``: run_at ahead; ``oldest_due_at``: the oldest due
        job's run_at (aware UTC; None when none is due), whose age is the queue's latency."""
        return [{"queue": r["queue"], "due": int(r["due"] or 0), "later": int(r["later"] or 0),
                 "oldest_due_at": r["oldest_due_at"]} for r in self.store.read("queue_depths", now=self.clock.now())]

    def finished_by_queue(self, since: datetime) -> list[dict[str, Any]]:
        """Jobs finished since ``since`` (aware) per queue and final state: ``[{"queue", "state", "n"}]``."""
        return [{"queue": r["queue"], "state": r["state"], "n": int(r["n"])}
                for r in self.store.read("finished_jobs_by_queue", since=require_aware(since, "since"))]

    def running(self, *, limit: int = 200) -> list[dict[str, Any]]:
        """What each worker runs now, oldest start first (at most ``limit``): rows ``id, queue, task, attempt,
        max_attempts, started_at, lease_expires_at, worker_id`` and the worker's process ``host, pid,
        process_name, heartbeat_at, stopped_at`` (None when its row is gone); instants aware UTC."""
        return self.store.read("running_jobs", limit=limit)
