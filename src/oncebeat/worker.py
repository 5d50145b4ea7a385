"""The worker: claims jobs in batches, runs their handlers in N slots, completes them in one statement.

Lifecycle:

- registers itself in ``processes`` (host, pid, process name, version, ``TZ``)
  and heartbeats: every ``lease_seconds / 3`` it renews the leases of the jobs
  it holds and its own ``heartbeat_at``;
- rescues jobs whose lease expired (their worker died) every ``rescue_interval``;
- fencing: before it starts each job of a batch, and before each new effect, it checks that it still
  holds the job (same attempt, lease not expired; near the lease's end it renews it in the database,
  or learns it lost it) — a job it lost is dropped without recording anything (``job.lost``);
  completions are committed within ``complete_within`` seconds (0.5) of a job's end, batched with the
  next claim when that comes sooner;
- self-fencing: when its heartbeats have failed up to its lease's end it starts no new effect, gives its
  batch up and claims nothing until a heartbeat gets through again;
- every store call of the loop (claim, complete, fail, heartbeat, rescue, return) is retried on a fresh
  connection after a transient error (a dropped connection, a lock timeout), and a store error that
  outlasts the retries never ends the worker: the job's lease runs out and the rescue puts it back;
- on SIGTERM/SIGINT it stops claiming, lets running jobs finish within
  ``grace_seconds`` (default 25 s, inside a PaaS's 30 s before SIGKILL), and
  returns unfinished jobs to the queue without burning an attempt.

Outcomes of a handler: return → ``completed``; :class:`~oncebeat.errors.Retry`
→ retried after its delay; :class:`~oncebeat.errors.Snooze` → run again after its delay without using
up an attempt (a wait on something outside the job; also :class:`~oncebeat.errors.RateLimited`, when a
task's ``rate_limit`` or ``ctx.rate_limit`` had no permit free); :class:`~oncebeat.errors.Discard`, a task's
``permanent_errors`` or :class:`~oncebeat.errors.EffectKeyConflict` →
``discarded`` at once; any other exception → retried with exponential backoff
and jitter until ``max_attempts``, then ``discarded``; every error is kept on
the job. Effects in doubt never stop a job's other effects: ``ctx.effect``
skips them, and a job that met any ends ``in_doubt`` naming their keys (also
when :class:`~oncebeat.errors.EffectInDoubt` escapes the handler); a job that
met a reused key with another payload ends ``discarded`` after its other
effects ran.

Tests and the simulator call :meth:`Worker.drain` (serial, deterministic);
processes call :meth:`Worker.run`.
"""

from __future__ import annotations

import logging
import os
import queue as _queue
import random
import signal
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import date, datetime, timedelta
from typing import Any, TypeVar

from . import ledger, processes, telemetry
from .app import App, TaskDef
from .crashpoints import SimulatedCrash  # importing it also arms ONCEBEAT_CRASH_AT (the kill tests)
from .dbtime import describe_time_source
from .effects import EffectLedger, Holder, OnDone, Reconcile
from .errors import (
    Discard,
    EffectBusy,
    EffectInDoubt,
    EffectKeyConflict,
    LeaseLost,
    Retry,
    Snooze,
    StoreError,
    TransientStoreError,
)
from .provenance import Source, current_source
from .queue import Job, LeftBehind, Queue
from .ratelimit import RateLimit, RateLimiter
from .store import Store, Tx
from .timebase import Clock, SystemClock

register_process = processes.register  # kept for callers of 0.1; new code uses oncebeat.processes

__all__ = ["Worker", "JobContext", "register_process"]

log = logging.getLogger("oncebeat.worker")

T = TypeVar("T")
STORE_RETRY_PAUSES = (0.05, 0.25, 1.0)  # seconds before each retry of a store call after a transient error
#: Most batches one claim takes while this worker's writes keep waiting for another process's (SQLite).
CONTENDED_CLAIM_BATCHES = 4


class JobContext:
    """What a handler gets as ``ctx``: the job, its occurrence and business date, effects, enqueueing.

    Attributes:
        job: the claimed :class:`~oncebeat.queue.Job` (``attempt`` counts from 1).
        store, clock, queue: the worker's (a handler enqueues follow-up jobs with :meth:`enqueue`).
        source: the provenance this worker stamps on what it causes (jobs it enqueues, effects).
    """

    def __init__(self, worker: Worker, job: Job) -> None:
        self.job = job
        self.worker = worker
        self.store = worker.store
        self.clock = worker.clock
        self.queue = worker.queue
        self.source: Source = worker.source
        self._effects = worker.effects
        self._limiter = worker.limiter
        self._occurrence: dict[str, Any] | None = None
        self.in_doubt: list[str] = []  # effect keys met in doubt during this attempt (skipped or raised)
        self.conflicts: list[str] = []  # effect keys reused with another payload (EffectKeyConflict text)
        self.lease_lost = False  # an effect was refused because this attempt no longer holds the job

    def effect(self, key: str, fn: Callable[..., Any], *, payload: Any = None, reconcile: Reconcile | None = None,
               freeze: Callable[[], bytes] | None = None, marks_point_of_no_return: bool = False,
               resource: AbstractContextManager[Any] | None = None, skip: bool = True,
               on_done: OnDone | None = None) -> Any:
        """Run side effect ``fn`` at most once for ``key`` (see :mod:`oncebeat.effects`); return its result.

        Args:
            freeze, marks_point_of_no_return, resource: see :meth:`oncebeat.effects.EffectLedger.run`.
            on_done: ``on_done(tx, result)`` commits the caller's own record in the transaction that records
                the key done.
            skip: True (default): a key in doubt, or reused with another payload, is skipped — this returns
                None, the key is listed in :attr:`in_doubt` / :attr:`conflicts` and the handler goes on with
                its other effects; the job then ends ``in_doubt`` (or ``discarded`` for a conflict) instead
                of ``completed``. False: :class:`EffectInDoubt` / :class:`EffectKeyConflict` are raised for
                the handler to handle (the job still ends naming the key).

        Raises:
            EffectBusy: another live attempt holds the key (the job is retried after a lease).
            EffectInDoubt, EffectKeyConflict: only with ``skip=False``.
            LeaseLost: this attempt no longer holds the job (fencing): let it through; the worker stops the job
                without recording anything.
        """
        holder = Holder(job_id=self.job.id, attempt=self.job.attempt, process_id=self.worker.process_id)
        try:
            self.worker.fence(self.job, f"starting effect {key!r}")
            return self._effects.run(key, fn, holder=holder, payload=payload, reconcile=reconcile,
                                     freeze=freeze, marks_point_of_no_return=marks_point_of_no_return,
                                     resource=resource, on_done=on_done)
        except LeaseLost:
            self.lease_lost = True  # the worker records nothing on this job, even if the handler swallows it
            raise
        except EffectInDoubt as exc:
            self.in_doubt.append(key)
            if not skip:
                raise
            log.warning("job %s: skipped effect %s (in doubt); its other effects go on: %s", self.job.id, key, exc,
                        extra={"event": "effect.skipped", "job_id": self.job.id})
        except EffectKeyConflict as exc:
            self.conflicts.append(str(exc))
            if not skip:
                raise
        return None

    def rate_limit(self, limit: RateLimit) -> AbstractContextManager[int]:
        """A permit of ``limit`` for a ``with`` block, over every worker (:mod:`oncebeat.ratelimit`).

        Take it as late as possible, right before the action it limits (inside the effect function, before its
        point of no return): the permit counts from then until the block ends (failed or not). Let the
        :class:`~oncebeat.errors.RateLimited` it raises when none is free out of the handler: the job is
        snoozed until a permit frees (no attempt used up); raised inside an effect function, the effect is
        recorded not done (``failed``) and the next attempt takes the key over.

        Raises:
            RateLimited: no permit is free (a :class:`~oncebeat.errors.Snooze`).
        """
        return self._limiter.permit(limit, job_id=self.job.id)

    def effect_state(self, key: str) -> str | None:
        """The ledger state of ``key`` (``started``, ``done``, ``in_doubt``, ``failed``), None if never claimed."""
        row = self._effects.get(key)
        return str(row["state"]) if row else None

    def occurrence(self) -> dict[str, Any] | None:
        """The occurrence-ledger row that caused this job (None for jobs not enqueued by a schedule)."""
        if self._occurrence is None and self.job.occurrence_id is not None:
            self._occurrence = ledger.get_occurrence(self.store, self.job.occurrence_id)
        return self._occurrence

    def business_date(self) -> date | None:
        """Local date of the job's occurrence in its schedule's zone (G7); None without an occurrence."""
        occ = self.occurrence()
        return occ["business_date"] if occ else None

    def enqueue(self, task: str, args: dict[str, Any] | None = None, *, tx: Tx | None = None,
                **options: Any) -> int | None:
        """Enqueue a follow-up job with this worker's provenance (see :meth:`oncebeat.queue.Queue.enqueue`)."""
        return self.queue.enqueue(task, args, tx=tx, **options)


class _Outcomes:
    """How the slots of :meth:`Worker.run` report to its loop, waking it rarely.

    A slot records each job's outcome here; the loop is woken when a slot has nothing left to do (fewer jobs
    without an outcome than ``free_below``: it may claim more), when a slot raised, and when the first
    completion of a commit window arrives (it then sleeps until that completion has waited ``complete_within``).
    Handing each outcome over through a queue woke the loop once per job; waiting for a whole batch's end let a
    long job idle every other slot until it finished.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._left: set[int] = set()  # dispatched, no outcome yet
        self._done: list[int] = []  # completed, not taken by the loop yet
        self._first: float | None = None  # when the oldest of _done finished (monotonic)
        self._error: BaseException | None = None
        self._free_below = 0  # wake the loop when fewer than this many jobs are left (0: never for that)

    def expect(self, ids: Iterable[int]) -> None:
        with self._cond:
            self._left.update(ids)

    def left(self) -> int:
        """Jobs dispatched that have no outcome yet (running, or waiting for a slot)."""
        with self._cond:
            return len(self._left)

    def put(self, job_id: int, outcome: bool | BaseException) -> None:
        with self._cond:
            self._left.discard(job_id)
            if isinstance(outcome, BaseException):
                self._error = self._error or outcome
            elif outcome:
                self._done.append(job_id)
                if self._first is None:
                    self._first = time.monotonic()
                    self._cond.notify()
                    return
            if self._error is not None or len(self._left) < self._free_below:
                self._cond.notify()

    def wait(self, timeout: float, complete_within: float, free_below: int = 0) -> tuple[list[int], bool]:
        """Wait up to ``timeout`` s; return (completions to commit now, a slot is free).

        A slot is free when fewer than ``free_below`` jobs are left. Completions are handed out when a slot is
        free, nothing is left to run, or the oldest has waited ``complete_within``. Raises what a slot's job
        raised (a simulated crash, an unexpected BaseException).
        """
        end = time.monotonic() + timeout
        with self._cond:
            self._free_below = free_below
            while True:
                if self._error is not None:
                    raise self._error
                now = time.monotonic()
                free = len(self._left) < free_below
                if free or not self._left or (self._first is not None and now - self._first >= complete_within):
                    done, self._done, self._first = self._done, [], None
                    return done, free
                if now >= end:
                    return [], False
                wake = end if self._first is None else min(end, self._first + complete_within)
                self._cond.wait(wake - now)

    def give_up(self) -> tuple[list[int], set[int]]:
        """The grace period is over: return (completions not taken yet, jobs still without an outcome)."""
        with self._cond:
            done, self._done, self._first = self._done, [], None
            return done, set(self._left)


class Worker:
    """Runs jobs of ``app``'s tasks from ``store``.

    Args:
        concurrency: handler slots (threads) in :meth:`run`.
        batch_size: jobs claimed per statement (default 10 per slot); :meth:`run` on SQLite claims up to four
            times it while its writes keep queueing behind another process's (one commit per claim, see
            ``_claim_size``).
        lease_seconds: lease taken at claim and renewed by heartbeat (every third of it).
        poll_interval: seconds to wait when the queue is empty.
        grace_seconds: how long running jobs may take to finish after SIGTERM.
        complete_within: seconds within which a finished job's completion is committed (default 0.5); it rides
            on the next claim when that comes sooner (one commit per batch when jobs are short).
        rng: source of retry jitter (the simulator passes a seeded one).

    Attributes:
        fence_margin: how long before its lease's end a job stops being taken on trust (a fifth of the lease):
            from then on each new start or effect renews the lease in the database first — or, with the
            heartbeat failing, is refused. The margin leaves the effect being started time to end before a
            rescuer may take the job over, and covers small clock differences between hosts.
    """

    def __init__(self, app: App, store: Store, *, clock: Clock | None = None, queues: Sequence[str] = ("default",),
                 concurrency: int = 1, batch_size: int | None = None, lease_seconds: float = 30.0,
                 poll_interval: float = 1.0, grace_seconds: float = 25.0, rescue_interval: float = 15.0,
                 complete_within: float = 0.5, source: Source | None = None,
                 rng: random.Random | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.app = app
        self.store = store
        self.clock = clock or SystemClock()
        self.queues = tuple(queues)
        self.concurrency = concurrency
        self.batch_size = batch_size or 10 * concurrency
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.grace_seconds = grace_seconds
        self.rescue_interval = rescue_interval
        self.complete_within = complete_within
        self.fence_margin = timedelta(seconds=lease_seconds / 5)
        self.source = source or current_source("worker")
        self.queue = Queue(store, clock=self.clock, source=self.source, rng=rng, app=app)
        self.effects = EffectLedger(store, clock=self.clock, source=self.source)
        self.limiter = RateLimiter(store, clock=self.clock)
        self.process_id: int | None = None
        self.stop_requested = threading.Event()
        self.stop_reason = "stopped"  # why run() ended, for its stop line
        self.processed = 0
        self._leases: dict[int, datetime] = {}  # job id -> end of its lease as known here (claim, heartbeat, renewal)
        self._lost: set[int] = set()  # held jobs whose lease the heartbeat could not renew: expired or taken over
        self._holding_lock = threading.Lock()
        self._heartbeat_failing = threading.Event()
        self._claim_batches = 1  # batches per claim: doubled per claim in a row that waited (SQLite; _claim_size)
        self._fenced = threading.Event()  # heartbeats failed up to a lease's end: no claims until one gets through
        self._last_heartbeat: datetime | None = None
        self._last_rescue = float("-inf")
        self.left = LeftBehind()  # what the last burst could not take

    # --- registration -------------------------------------------------------------------------
    def register(self) -> int:
        if self.process_id is None:
            self.process_id = processes.register(self.store, role="worker", source=self.source, clock=self.clock,
                                               info={"queues": list(self.queues), "concurrency": self.concurrency})
        return self.process_id

    def stop_process(self) -> None:
        if self.process_id is not None:
            now = self.clock.now()
            processes.stop(self.store, self.process_id, source=self.source, now=now,
                           detail={"processed": self.processed})

    # --- store calls and fencing --------------------------------------------------------------
    def _db(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One store call of the worker loop, retried after a transient error (a dropped connection, a lock timeout).

        Each try is a new transaction on a connection the pool checked, so a connection that was cut is never
        used twice. The calls retried are idempotent or fenced (a second completion or failure of the same
        attempt changes nothing). Raises the last :class:`TransientStoreError` after ``STORE_RETRY_PAUSES``.
        """
        for pause in STORE_RETRY_PAUSES:
            try:
                return fn(*args, **kwargs)
            except TransientStoreError as exc:
                log.warning("%s failed, retrying in %.2f s: %s", what, pause, exc,
                            extra={"event": "worker.store_retry"})
                self.clock.sleep(pause)
        return fn(*args, **kwargs)

    def _hold(self, jobs: Iterable[Job]) -> None:
        with self._holding_lock:
            for job in jobs:
                if job.lease_expires_at is not None:
                    self._leases[job.id] = job.lease_expires_at

    def _release(self, ids: Iterable[int]) -> None:
        with self._holding_lock:
            for job_id in ids:
                self._leases.pop(job_id, None)
                self._lost.discard(job_id)

    def fence(self, job: Job, doing: str) -> None:
        """Fencing: raise :class:`LeaseLost` unless this worker may go on with ``job`` (``doing`` names the step).

        Free while the lease known here has more than :attr:`fence_margin` left. Nearer its end the lease is
        renewed in the database if this attempt still holds the job with an unexpired lease — unless the
        heartbeat is failing: then the worker gives the job up rather than go on past a lease it cannot renew
        (self-fencing). A job not claimed through :meth:`run` or :meth:`drain` is left to the effect ledger's
        own check of the holder.

        Raises:
            LeaseLost: the lease expired, another attempt holds the job, or the heartbeat is failing near the end.
        """
        with self._holding_lock:
            until = self._leases.get(job.id)
            lost = job.id in self._lost
        if lost:
            raise LeaseLost(job.id, job.attempt, f"the heartbeat found its lease expired or taken over; not {doing}")
        now = self.clock.now()
        if until is None or now < until - self.fence_margin:
            return
        if self._heartbeat_failing.is_set():
            self._self_fence()
            raise LeaseLost(job.id, job.attempt, f"heartbeats are failing and the lease ends at {until.isoformat()}; "
                            f"not {doing}")
        try:
            held = self._db("renewing a lease", self.queue.extend_leases, self.register(), [job.id],
                            lease_seconds=self.lease_seconds)
        except StoreError as exc:
            raise LeaseLost(job.id, job.attempt, f"the lease could not be renewed ({exc}); not {doing}") from exc
        if held.get(job.id) != job.attempt:
            raise LeaseLost(job.id, job.attempt, f"the lease ended at {until.isoformat()} or the job moved on; "
                            f"not {doing}")
        with self._holding_lock:
            if job.id in self._leases:
                self._leases[job.id] = now + timedelta(seconds=self.lease_seconds)

    def _may_start(self, job: Job) -> bool:
        """Fencing before each job of a batch starts: a job whose lease is lost is dropped (logged, ``job.lost``)."""
        try:
            self.fence(job, "starting it")
        except LeaseLost as exc:
            self._drop(job, exc, started=False)
            return False
        return True

    def _drop(self, job: Job, exc: LeaseLost, *, started: bool) -> None:
        self._release([job.id])
        log.warning("%s", exc, extra={"event": "job.lost", "job_id": job.id})
        telemetry.emit("job.lost", {"task": job.task, "queue": job.queue, "attempt": job.attempt, "started": started,
                                    "reason": str(exc)})

    # --- one job ------------------------------------------------------------------------------
    def execute(self, job: Job) -> bool:
        """Run one claimed job's handler and record failures. Returns True if it should be completed.

        :class:`SimulatedCrash` propagates (the 'process' died: nothing is recorded); so does a
        :class:`StoreError` that outlasted the retries (nothing is recorded either: the lease runs out).
        """
        started = time.monotonic()
        # Each event's data (a dict, the clock read for the latency) is built only for a subscriber: nobody listening
        # is the embedded worker's usual case, and building both cost ~2.5 us of a no-op job's ~20 (round 3b).
        if telemetry.listening("job.started"):
            latency = max(0.0, (self.clock.now() - job.run_at).total_seconds())
            telemetry.emit("job.started", {"job_id": job.id, "task": job.task, "queue": job.queue,
                                           "attempt": job.attempt, "occurrence_id": job.occurrence_id,
                                           "latency_seconds": latency})
        outcome = self._execute(job)
        if telemetry.listening("job.finished"):
            telemetry.emit("job.finished", {"job_id": job.id, "task": job.task, "queue": job.queue,
                                            "attempt": job.attempt, "outcome": outcome,
                                            "seconds": time.monotonic() - started})
        return outcome == "completed"

    def _execute(self, job: Job) -> str:
        """Run the handler; record a failure; return the outcome (``completed`` or the failure's kind)."""
        task = self.app.tasks.get(job.task)
        wid = self.register()
        if task is None:
            self._fail(job, wid, f"no handler registered for task {job.task!r} in this worker", permanent=True,
                       kind="unknown_task")
            return "unknown_task"
        ctx = JobContext(self, job)
        error: Exception | None = None
        try:
            with ctx.rate_limit(task.rate_limit) if task.rate_limit is not None else nullcontext():
                task.fn(ctx, **job.args)
        except Exception as exc:  # noqa: BLE001 - every outcome is recorded below (a SimulatedCrash passes)
            error = exc  # a RateLimited task-level permit is a Snooze: recorded as one
        if ctx.lease_lost or isinstance(error, LeaseLost):
            lost = error if isinstance(error, LeaseLost) else LeaseLost(job.id, job.attempt, "an effect was refused")
            self._drop(job, lost, started=True)  # the current holder or the rescue owns it: record nothing
            return "lease_lost"
        return self._record(task, job, wid, ctx, error)

    def _record(self, task: TaskDef, job: Job, wid: int, ctx: JobContext, error: Exception | None) -> str:
        """Record how a handler ended (``error`` None: it returned); return the outcome."""
        if isinstance(error, EffectInDoubt) and error.key not in ctx.in_doubt:
            ctx.in_doubt.append(error.key)
        if isinstance(error, EffectKeyConflict) and str(error) not in ctx.conflicts:
            ctx.conflicts.append(str(error))
        if error is None or isinstance(error, (EffectInDoubt, EffectKeyConflict)):
            return self._settle(job, wid, ctx)
        if isinstance(error, Retry):
            self._fail(job, wid, error.reason or "retry requested", delay=error.delay, kind="retry")
            return "retry"
        if isinstance(error, Snooze):
            self._db("recording a snooze", self.queue.snooze, job, wid, error.reason, delay=error.delay)
            return "snooze"
        if isinstance(error, Discard):
            self._fail(job, wid, error.reason, permanent=True, kind="discard")
            return "discard"
        if isinstance(error, EffectBusy):
            self._fail(job, wid, str(error), delay=self.lease_seconds, kind="busy")
            return "busy"
        permanent = bool(task.permanent_errors) and isinstance(error, task.permanent_errors)
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        log.warning("job %s (%s) attempt %s failed: %s", job.id, job.task, job.attempt, detail,
                    extra={"event": "job.failed", "job_id": job.id})
        self._fail(job, wid, detail, permanent=permanent, kind="error")
        return "error"

    def _fail(self, job: Job, wid: int, error: str, **options: Any) -> None:
        self._db("recording a failed attempt", self.queue.fail, job, wid, error, **options)

    def _settle(self, job: Job, wid: int, ctx: JobContext) -> str:
        """End a handler that ran to its end: ``completed``, or record its conflicts / in-doubt keys."""
        if ctx.conflicts:  # a programming error: never retried, but the other effects did run
            note = f"; effects in doubt: {', '.join(ctx.in_doubt)}" if ctx.in_doubt else ""
            self._fail(job, wid, "; ".join(ctx.conflicts) + note, permanent=True, kind="effect_conflict")
            return "effect_conflict"
        if ctx.in_doubt:
            keys = list(dict.fromkeys(ctx.in_doubt))
            self._db("recording effects in doubt", self.queue.hold_in_doubt, job, wid, keys)
            return "in_doubt"
        return "completed"

    # --- serial drain (tests, simulator, demo) ------------------------------------------------
    def run_batch(self) -> int:
        """Claim one batch of due jobs, run them serially in this thread and complete them; return how many."""
        n, done = self._batch(())
        self._commit(done)
        return n

    def _commit(self, done: Sequence[int]) -> None:
        if done:
            self._db("completing jobs", self.queue.complete, self.register(), done)
            self._release(done)

    def _batch(self, finished: Sequence[int]) -> tuple[int, list[int]]:
        """Complete ``finished`` and claim the next batch in one transaction; run it; return (claimed, done).

        A job whose lease is lost is dropped, not run (fencing); completions are committed on the way, at the
        first job end after the oldest has waited ``complete_within`` seconds of this worker's clock (serially,
        a completion can wait for one more job), else with the next claim.
        """
        wid = self.register()
        now = self.clock.now()
        if self._last_heartbeat is None or (now - self._last_heartbeat).total_seconds() >= self.lease_seconds / 3:
            self.heartbeat()  # drain mode has no heartbeat thread
            self._last_heartbeat = now
        with telemetry.span("job.claimed", {"worker_id": wid, "queues": list(self.queues)}) as claimed:
            jobs = self.queue.claim(wid, queues=self.queues, limit=self.batch_size,
                                    lease_seconds=self.lease_seconds, complete=finished)
            claimed["count"] = len(jobs)
        self._release(finished)
        if not jobs:
            return 0, []
        self._hold(jobs)
        done: list[int] = []
        first_done: datetime | None = None
        for i, job in enumerate(jobs):
            if i:
                telemetry.emit("job.batch_step", {"worker_id": wid, "done": i, "left": len(jobs) - i})
            if self._may_start(job) and self.execute(job):
                done.append(job.id)
                first_done = first_done or self.clock.now()
            if first_done is not None and (self.clock.now() - first_done).total_seconds() >= self.complete_within:
                self._commit(done)
                done, first_done = [], None
        self._release(j.id for j in jobs if j.id not in done)
        telemetry.emit("job.batch_done", {"worker_id": wid, "count": len(jobs)})
        self.processed += len(jobs)
        return len(jobs), done

    def drain(self, *, max_batches: int | None = None) -> int:
        """Run batches until no job is due now (simulated or real time); return jobs claimed.

        Each batch's completions commit with the next batch's claim (or on the way, see :meth:`_batch`); the
        last ones on their own.
        """
        total = 0
        batches = 0
        done: list[int] = []
        while max_batches is None or batches < max_batches:
            n, done_next = self._batch(done)
            done = []
            if n == 0:
                break
            done = done_next
            total += n
            batches += 1
        self._commit(done)
        return total

    def burst(self, *, wait_for_leases: float = 0.0) -> dict[str, int]:
        """Process every job that is due now, then stop: for cron-driven deployments and CI (``worker --burst``).

        Rescues jobs whose lease expired first, then runs batches in this thread until none is due (a job
        scheduled later, e.g. a retry with backoff, is left for the next run), and records the process as
        stopped. What it could not take is in :attr:`left` afterwards (jobs under another worker's lease, jobs
        due later). With ``wait_for_leases`` (seconds) it waits, within that bound, for the leases of other
        workers' jobs to end — a killed worker's jobs are rescued then and run here — instead of leaving them
        for the next run (a daily cron burst would defer them a day).

        Returns:
            The outcomes counted from the ``job.finished`` telemetry of this process:
            ``{"completed", "retried", "snoozed", "discarded", "in_doubt", "other"}`` (jobs). ``snoozed``: run
            again later without using an attempt (a cap, a freshness fence, a send window, a mail outage), no
            failure, so not counted as retried.
        """
        outcomes: Counter[str] = Counter()
        names = {"completed": "completed", "retry": "retried", "snooze": "snoozed", "discard": "discarded",
                 "unknown_task": "discarded", "effect_conflict": "discarded", "in_doubt": "in_doubt"}

        def count(_: str, data: Mapping[str, Any]) -> None:
            outcomes[names.get(str(data.get("outcome")), "other")] += 1

        telemetry.attach("job.finished", count)
        try:
            wid = self.register()
            deadline = time.monotonic() + wait_for_leases
            while True:
                self.rescue()
                self.drain()
                self.left = self.queue.left_behind(wid, self.queues)
                if not self.left.leased or self.left.leased_from is None or self.stop_requested.is_set():
                    break
                # a lease ends: the rescue may take that job then (a live worker renews it; the bound ends the wait)
                wait = (self.left.leased_from - self.clock.now()).total_seconds() + 0.2
                if time.monotonic() + wait > deadline:
                    break
                log.info("waiting %.1f s for the lease of %d job(s) of another worker to end", max(wait, 0.0),
                         self.left.leased, extra={"event": "worker.burst_waiting"})
                self.stop_requested.wait(max(0.05, wait))
        finally:
            telemetry.detach("job.finished", count)
            self.stop_process()
        return {k: outcomes.get(k, 0) for k in ("completed", "retried", "snoozed", "discarded", "in_doubt", "other")}

    def rescue(self) -> list[dict[str, Any]]:
        rows = self.queue.rescue()
        for r in rows:
            log.warning("rescued job %s (%s): worker %s stopped heartbeating; now %s", r["id"], r["task"],
                        r["worker_id"], r["state"], extra={"event": "job.rescued", "job_id": r["id"]})
        return rows

    # --- heartbeat and self-fencing -----------------------------------------------------------
    def _heartbeat_loop(self, done: threading.Event) -> None:
        interval = max(0.05, self.lease_seconds / 3)
        while not done.wait(interval):
            self.heartbeat()

    def heartbeat(self) -> None:
        """Record the process alive and renew the leases of the jobs held; fence itself when that keeps failing.

        A held job whose lease the database no longer renews (it expired, or the job was rescued) is marked
        lost: it is not started and its effects are refused. When heartbeats fail until a held job's lease is
        within :attr:`fence_margin` of its end, the worker fences itself: no new effect, its batch given up,
        no claim until a heartbeat gets through (a ``worker.fenced`` event). Never raises.
        """
        wid = self.register()
        with self._holding_lock:
            ids = list(self._leases)
        before = self.clock.now()
        try:
            held = self._beat(wid, ids, before)
        except Exception:  # noqa: BLE001 - no lease renewal on trust from now on, then retry on fresh connections
            self._heartbeat_failing.set()
            try:
                held = self._db("heartbeat", self._beat, wid, ids, before)
            except Exception as exc:  # noqa: BLE001 - a blip must not kill the heartbeat; the lease margin absorbs it
                log.warning("heartbeat failed: %s", exc, extra={"event": "worker.heartbeat_failed"})
                self._self_fence()
                return
        self._heartbeat_failing.clear()
        self._fenced.clear()
        lost = []
        with self._holding_lock:
            for job_id in ids:
                if job_id not in self._leases:
                    continue  # finished meanwhile
                if job_id in held:
                    self._leases[job_id] = before + timedelta(seconds=self.lease_seconds)
                else:
                    self._lost.add(job_id)
                    lost.append(job_id)
        if lost:
            log.warning("heartbeat: the leases of job(s) %s had expired or were taken over; not starting them, no "
                        "new effect for them", ", ".join(map(str, lost)), extra={"event": "job.lost"})

    def _beat(self, wid: int, ids: list[int], now: datetime) -> dict[int, int]:
        processes.heartbeat(self.store, wid, now)
        return self.queue.extend_leases(wid, ids, lease_seconds=self.lease_seconds)

    def _self_fence(self) -> None:
        """After a failed heartbeat: fence once a held job's lease is within :attr:`fence_margin` of its end."""
        now = self.clock.now()
        with self._holding_lock:
            ends = list(self._leases.values())
        if not ends or now < min(ends) - self.fence_margin or self._fenced.is_set() \
                or not self._heartbeat_failing.is_set():
            return
        self._fenced.set()
        log.error("heartbeats have failed up to the end of the lease: self-fencing — no new effect is started, the "
                  "%d job(s) held are given up to the rescue, nothing is claimed until a heartbeat gets through",
                  len(ends), extra={"event": "worker.fenced"})
        telemetry.emit("worker.fenced", {"worker_id": self.process_id, "jobs": len(ends)})

    # --- real process -------------------------------------------------------------------------
    def request_stop(self, signum: int | None = None, *_: Any) -> None:
        """Claim nothing more; running jobs get ``grace_seconds``. ``signum`` names why in the stop line."""
        if not self.stop_requested.is_set():
            self.stop_reason = signal.Signals(signum).name if signum else "stop requested"
            log.info("stop requested (%s): no new claims; running jobs get %.0f s to finish", self.stop_reason,
                     self.grace_seconds, extra={"event": "worker.stopping"})
        self.stop_requested.set()

    def _run_one(self, job: Job) -> bool | BaseException:
        """A slot's turn: fencing, then the job. A store error that outlasted the retries never ends the worker."""
        try:
            return self._may_start(job) and self.execute(job)
        except StoreError as exc:
            log.error("job %s (%s): its outcome could not be recorded (%s); its lease will run out and the rescue "
                      "puts it back", job.id, job.task, exc, extra={"event": "worker.record_failed", "job_id": job.id})
            self._release([job.id])
            return False
        except SimulatedCrash as crash:  # the 'process' died here: the main loop ends the worker as kill -9 would
            return crash
        except BaseException as exc:  # noqa: BLE001 - reported to the main loop
            return exc

    def _claim_size(self) -> int:
        """Jobs to hold after the next claim: ``batch_size``, doubled per claim in a row whose write waited for
        another process's, up to :data:`CONTENDED_CLAIM_BATCHES` times it. Called once per claim.

        Why: SQLite lets one process write at a time, and each claim is one transaction with its fsync under that
        lock. When this worker's last write waited for another process's (``Store.write_waited``), the lock is
        the bottleneck, and more jobs per claim mean fewer commits per job (measured, two connections taking
        turns, ``synchronous=FULL``, per-repetition medians: the lock is held 0.64 × as long per job at 200 as
        at 100, 0.37 × at 400, no less at 800; docs/benchmarks.md, round 3d). Growing by one doubling per
        contended claim keeps a single unlucky wait (a heartbeat or another worker's flush committing at that
        moment, while jobs are slow) to two batches, as before; only claims that keep queueing back to back,
        i.e. short jobs, reach four. A claim that found the lock free goes back to ``batch_size``. PostgreSQL
        never reports a wait: always ``batch_size``.
        """
        waited = self.store.write_waited()
        self._claim_batches = min(2 * self._claim_batches, CONTENDED_CLAIM_BATCHES) if waited else 1
        return self.batch_size * self._claim_batches

    def _claim(self, wid: int, done: list[int], *, limit: int) -> list[Job] | None:
        """Rescue when due, then commit ``done`` with a claim of up to ``limit`` jobs; None if the store failed."""
        try:
            if time.monotonic() - self._last_rescue >= self.rescue_interval:
                self._last_rescue = time.monotonic()
                self._db("rescue", self.rescue)
            jobs = self._db("claim", self.queue.claim, wid, queues=self.queues, limit=max(1, limit),
                            lease_seconds=self.lease_seconds, complete=done)
        except StoreError as exc:  # database away: wait and try again; leases protect held work
            log.warning("claim failed: %s", exc, extra={"event": "worker.claim_failed"})
            return None
        self._release(done)
        return jobs

    def _flush(self, wid: int, done: list[int]) -> bool:
        """Commit the completions of ``done`` now; False (kept for the next try) if the store failed."""
        try:
            self._db("completing jobs", self.queue.complete, wid, done)
        except StoreError as exc:
            log.warning("completing %d jobs failed: %s", len(done), exc, extra={"event": "worker.complete_failed"})
            return False
        self._release(done)
        return True

    def _finish(self, wid: int, done: list[int], outcomes: _Outcomes) -> tuple[list[int], set[int]]:
        """After a stop: wait up to ``grace_seconds`` for the jobs still running or waiting for a slot.

        Returns (completions not committed yet, jobs unfinished at the grace's end). Completions found on the
        way are committed within ``complete_within`` seconds, as while running.
        """
        deadline = time.monotonic() + self.grace_seconds
        while outcomes.left():
            timeout = max(0.0, min(0.1, deadline - time.monotonic()))
            taken, _ = outcomes.wait(timeout, self.complete_within)
            done += taken
            self.processed += len(taken)
            if time.monotonic() >= deadline:
                taken, unfinished = outcomes.give_up()
                self.processed += len(taken)
                return done + taken, unfinished
            if taken and self._flush(wid, done):
                done = []
        taken, _ = outcomes.give_up()
        self.processed += len(taken)
        return done + taken, set()

    def _give_back(self, wid: int, inbox: _queue.SimpleQueue[Job | None], unfinished: set[int]) -> int:
        """Grace period over: drop queued-but-unstarted work and return the unfinished jobs; return how many."""
        while True:
            try:
                inbox.get_nowait()
            except _queue.Empty:
                break
        try:
            returned = len(self._db("returning jobs", self.queue.return_jobs, wid, sorted(unfinished)))
        except StoreError as exc:
            log.warning("returning %d jobs failed (%s); the rescue puts them back when their leases end",
                        len(unfinished), exc, extra={"event": "worker.returned_jobs"})
            return 0
        log.warning("grace period over: returned %d unfinished jobs to the queue", len(unfinished),
                    extra={"event": "worker.returned_jobs"})
        return returned

    def run(self, *, install_signals: bool = True, stop_after: float | None = None) -> dict[str, int]:
        """Work until SIGTERM/SIGINT (or ``stop_after`` seconds); return counts.

        Returns ``{"processed": n, "returned": m}`` — ``returned`` counts jobs
        given back to the queue because they did not finish within the grace period.
        """
        wid = self.register()
        if install_signals:
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        log.info("worker %s started: queues %s, %d slots, batch %d, lease %g s, database %s, time source %s, "
                 "oncebeat %s, pid %d", wid, ",".join(self.queues), self.concurrency, self.batch_size,
                 self.lease_seconds, self.store.url, describe_time_source(self.clock), self.source.version,
                 os.getpid(), extra={"event": "worker.started"})
        outcomes = _Outcomes()
        inbox: _queue.SimpleQueue[Job | None] = _queue.SimpleQueue()

        def slot() -> None:
            while (job := inbox.get()) is not None:
                outcome = self._run_one(job)
                if outcome is False:
                    self._release([job.id])  # failed and recorded, or dropped: no lease to renew any more
                outcomes.put(job.id, outcome)

        slots = [threading.Thread(target=slot, name=f"oncebeat-slot-{i}", daemon=True) for i in range(self.concurrency)]
        for t in slots:
            t.start()
        hb_done = threading.Event()
        hb = threading.Thread(target=self._heartbeat_loop, args=(hb_done,), name="oncebeat-heartbeat", daemon=True)
        hb.start()
        started = time.monotonic()
        returned = 0
        done: list[int] = []  # finished, not committed yet: they ride on the next claim
        next_claim = 0.0  # monotonic instant before which the queue is not asked again (it was found empty)
        try:
            while not self.stop_requested.is_set():
                if stop_after is not None and time.monotonic() - started >= stop_after:
                    self.stop_reason = f"ran its {stop_after:g} s"
                    break
                if self._fenced.is_set():  # self-fenced: claim nothing until a heartbeat gets through
                    self.stop_requested.wait(self.poll_interval)
                    continue
                left = outcomes.left()
                # A free slot claims as soon as it is free, whatever the others still run; the claim tops the
                # work in hand up to a batch, so slots that finish together still share one claim statement.
                if left < self.concurrency and time.monotonic() >= next_claim:
                    want = self._claim_size() - left
                    jobs = self._claim(wid, done, limit=want)
                    if jobs is not None:
                        done = []  # committed with the claim
                    if jobs:
                        self._hold(jobs)
                        outcomes.expect(j.id for j in jobs)
                        for job in jobs:
                            inbox.put(job)
                    if jobs is None or len(jobs) < want:
                        next_claim = time.monotonic() + self.poll_interval  # drained for now, or the store failed
                    continue
                claim_open = time.monotonic() >= next_claim
                if not claim_open and not outcomes.left():  # idle: nothing runs, the queue was empty
                    taken, _ = outcomes.wait(0.0, self.complete_within)  # the last completions, at once
                    done += taken
                    self.processed += len(taken)
                    if done and self._flush(wid, done):
                        done = []
                    self.stop_requested.wait(next_claim - time.monotonic())
                    continue
                taken, free = outcomes.wait(0.1, self.complete_within, free_below=self.concurrency if claim_open else 0)
                done += taken
                self.processed += len(taken)
                if taken and not free and self._flush(wid, done):
                    done = []  # no claim comes now: commit within complete_within anyway
            done, unfinished = self._finish(wid, done, outcomes)
            if unfinished:
                returned += self._give_back(wid, inbox, unfinished)
                self._release(unfinished)
        finally:
            hb_done.set()
            for _ in slots:
                inbox.put(None)
        self._flush(wid, done)
        self.stop_process()
        log.info("worker %s stopped (%s): %d jobs processed, %d returned", wid, self.stop_reason, self.processed,
                 returned, extra={"event": "worker.stopped"})
        return {"processed": self.processed, "returned": returned}
