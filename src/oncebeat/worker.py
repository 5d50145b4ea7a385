"""The worker: claims jobs in batches, runs their handlers in N slots, completes them in one statement.

Lifecycle:

- registers itself in ``processes`` (host, pid, process name, version, ``TZ``)
  and heartbeats: every ``lease_seconds / 3`` it renews the leases of the jobs
  it holds and its own ``heartbeat_at``;
- rescues jobs whose lease expired (their worker died) every ``rescue_interval``;
- on SIGTERM/SIGINT it stops claiming, lets running jobs finish within
  ``grace_seconds`` (default 25 s, inside a PaaS's 30 s before SIGKILL), and
  returns unfinished jobs to the queue without burning an attempt.

Outcomes of a handler: return → ``completed``; :class:`~oncebeat.errors.Retry`
→ retried after its delay; :class:`~oncebeat.errors.Discard`, a task's
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
import queue as _queue
import random
import signal
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime
from typing import Any

from . import processes, telemetry
from .app import App
from .crashpoints import SimulatedCrash
from .effects import EffectLedger, Holder, OnDone, Reconcile
from .errors import (
    Discard,
    EffectBusy,
    EffectInDoubt,
    EffectKeyConflict,
    Retry,
    StoreError,
)
from .provenance import Source, current_source
from .queue import Job, Queue
from .store import Store, Tx
from .timebase import Clock, SystemClock

register_process = processes.register  # kept for callers of 0.1; new code uses oncebeat.processes

__all__ = ["Worker", "JobContext", "register_process"]

log = logging.getLogger("oncebeat.worker")


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
        self._occurrence: dict[str, Any] | None = None
        self.in_doubt: list[str] = []  # effect keys met in doubt during this attempt (skipped or raised)
        self.conflicts: list[str] = []  # effect keys reused with another payload (EffectKeyConflict text)

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
        """
        holder = Holder(job_id=self.job.id, attempt=self.job.attempt, process_id=self.worker.process_id)
        try:
            return self._effects.run(key, fn, holder=holder, payload=payload, reconcile=reconcile,
                                     freeze=freeze, marks_point_of_no_return=marks_point_of_no_return,
                                     resource=resource, on_done=on_done)
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

    def effect_state(self, key: str) -> str | None:
        """The ledger state of ``key`` (``started``, ``done``, ``in_doubt``, ``failed``), None if never claimed."""
        row = self._effects.get(key)
        return str(row["state"]) if row else None

    def occurrence(self) -> dict[str, Any] | None:
        """The occurrence-ledger row that caused this job (None for jobs not enqueued by a schedule)."""
        if self._occurrence is None and self.job.occurrence_id is not None:
            rows = self.store.read("get_occurrence", id=self.job.occurrence_id)
            self._occurrence = rows[0] if rows else None
        return self._occurrence

    def business_date(self) -> date | None:
        """Local date of the job's occurrence in its schedule's zone (G7); None without an occurrence."""
        occ = self.occurrence()
        return occ["business_date"] if occ else None

    def enqueue(self, task: str, args: dict[str, Any] | None = None, *, tx: Tx | None = None,
                **options: Any) -> int | None:
        """Enqueue a follow-up job with this worker's provenance (see :meth:`oncebeat.queue.Queue.enqueue`)."""
        return self.queue.enqueue(task, args, tx=tx, **options)


class Worker:
    """Runs jobs of ``app``'s tasks from ``store``.

    Args:
        concurrency: handler slots (threads) in :meth:`run`.
        batch_size: jobs claimed per statement (default 10 per slot).
        lease_seconds: lease taken at claim and renewed by heartbeat.
        poll_interval: seconds to wait when the queue is empty.
        grace_seconds: how long running jobs may take to finish after SIGTERM.
        rng: source of retry jitter (the simulator passes a seeded one).
    """

    def __init__(self, app: App, store: Store, *, clock: Clock | None = None, queues: Sequence[str] = ("default",),
                 concurrency: int = 1, batch_size: int | None = None, lease_seconds: float = 30.0,
                 poll_interval: float = 1.0, grace_seconds: float = 25.0, rescue_interval: float = 15.0,
                 source: Source | None = None, rng: random.Random | None = None) -> None:
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
        self.source = source or current_source("worker")
        self.queue = Queue(store, clock=self.clock, source=self.source, rng=rng, app=app)
        self.effects = EffectLedger(store, clock=self.clock, source=self.source)
        self.process_id: int | None = None
        self.stop_requested = threading.Event()
        self.processed = 0
        self._holding: set[int] = set()
        self._last_heartbeat: datetime | None = None
        self._holding_lock = threading.Lock()

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

    # --- one job ------------------------------------------------------------------------------
    def execute(self, job: Job) -> bool:
        """Run one claimed job's handler and record failures. Returns True if it should be completed.

        :class:`SimulatedCrash` propagates (the 'process' died: nothing is recorded).
        """
        started = time.monotonic()
        telemetry.emit("job.started", {"task": job.task, "queue": job.queue, "attempt": job.attempt,
                                       "latency_seconds": max(0.0, (self.clock.now() - job.run_at).total_seconds())})
        outcome = self._execute(job)
        telemetry.emit("job.finished", {"task": job.task, "queue": job.queue, "outcome": outcome,
                                        "seconds": time.monotonic() - started})
        return outcome == "completed"

    def _execute(self, job: Job) -> str:
        """Run the handler; record a failure; return the outcome (``completed`` or the failure's kind)."""
        task = self.app.tasks.get(job.task)
        wid = self.register()
        if task is None:
            self.queue.fail(job, wid, f"no handler registered for task {job.task!r} in this worker", permanent=True,
                            kind="unknown_task")
            return "unknown_task"
        ctx = JobContext(self, job)
        try:
            task.fn(ctx, **job.args)
            return self._settle(job, wid, ctx)
        except SimulatedCrash:
            raise
        except Retry as sig:
            self.queue.fail(job, wid, sig.reason or "retry requested", delay=sig.delay, kind="retry")
            return "retry"
        except Discard as sig:
            self.queue.fail(job, wid, sig.reason, permanent=True, kind="discard")
            return "discard"
        except EffectInDoubt as exc:
            if exc.key not in ctx.in_doubt:
                ctx.in_doubt.append(exc.key)
            return self._settle(job, wid, ctx)
        except EffectKeyConflict as exc:
            if str(exc) not in ctx.conflicts:
                ctx.conflicts.append(str(exc))
            return self._settle(job, wid, ctx)
        except EffectBusy as exc:
            self.queue.fail(job, wid, str(exc), delay=self.lease_seconds, kind="busy")
            return "busy"
        except Exception as exc:
            permanent = bool(task.permanent_errors) and isinstance(exc, task.permanent_errors)
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            log.warning("job %s (%s) attempt %s failed: %s", job.id, job.task, job.attempt, detail,
                        extra={"event": "job.failed", "job_id": job.id})
            self.queue.fail(job, wid, detail, permanent=permanent, kind="error")
            return "error"

    def _settle(self, job: Job, wid: int, ctx: JobContext) -> str:
        """End a handler that ran to its end: ``completed``, or record its conflicts / in-doubt keys."""
        if ctx.conflicts:  # a programming error: never retried, but the other effects did run
            note = f"; effects in doubt: {', '.join(ctx.in_doubt)}" if ctx.in_doubt else ""
            self.queue.fail(job, wid, "; ".join(ctx.conflicts) + note, permanent=True, kind="effect_conflict")
            return "effect_conflict"
        if ctx.in_doubt:
            self.queue.hold_in_doubt(job, wid, list(dict.fromkeys(ctx.in_doubt)))
            return "in_doubt"
        return "completed"

    # --- serial drain (tests, simulator, demo) ------------------------------------------------
    def run_batch(self) -> int:
        """Claim one batch of due jobs, run them serially in this thread and complete them; return how many."""
        n, done = self._batch(())
        if n:
            self.queue.complete(self.register(), done)
        return n

    def _batch(self, finished: Sequence[int]) -> tuple[int, list[int]]:
        """Complete ``finished`` and claim the next batch in one transaction; run it; return (claimed, done)."""
        wid = self.register()
        now = self.clock.now()
        if self._last_heartbeat is None or (now - self._last_heartbeat).total_seconds() >= self.lease_seconds / 3:
            processes.heartbeat(self.store, wid, now)  # drain mode has no heartbeat thread
            self._last_heartbeat = now
        with telemetry.span("job.claimed", {"worker_id": wid, "queues": list(self.queues)}) as claimed:
            jobs = self.queue.claim(wid, queues=self.queues, limit=self.batch_size,
                                    lease_seconds=self.lease_seconds, complete=finished)
            claimed["count"] = len(jobs)
        if not jobs:
            return 0, []
        done: list[int] = []
        for i, job in enumerate(jobs):
            if i:
                telemetry.emit("job.batch_step", {"worker_id": wid, "done": i, "left": len(jobs) - i})
            if self.execute(job):
                done.append(job.id)
        telemetry.emit("job.batch_done", {"worker_id": wid, "count": len(jobs)})
        self.processed += len(jobs)
        return len(jobs), done

    def drain(self, *, max_batches: int | None = None) -> int:
        """Run batches until no job is due now (simulated or real time); return jobs claimed.

        Each batch's completions commit with the next batch's claim; the last ones on their own.
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
        if done:
            self.queue.complete(self.register(), done)
        return total

    def burst(self) -> dict[str, int]:
        """Process every job that is due now, then stop: for cron-driven deployments and CI (``worker --burst``).

        Rescues jobs whose lease expired first, then runs batches in this thread until none is due (a job
        scheduled later, e.g. a retry with backoff, is left for the next run), and records the process as
        stopped. Returns the outcomes counted from the ``job.finished`` telemetry of this process:
        ``{"completed", "retried", "discarded", "in_doubt", "other"}`` (jobs).
        """
        outcomes: Counter[str] = Counter()
        names = {"completed": "completed", "retry": "retried", "discard": "discarded", "unknown_task": "discarded",
                 "effect_conflict": "discarded", "in_doubt": "in_doubt"}

        def count(_: str, data: Mapping[str, Any]) -> None:
            outcomes[names.get(str(data.get("outcome")), "other")] += 1

        telemetry.attach("job.finished", count)
        try:
            self.register()
            self.rescue()
            self.drain()
        finally:
            telemetry.detach("job.finished", count)
            self.stop_process()
        return {k: outcomes.get(k, 0) for k in ("completed", "retried", "discarded", "in_doubt", "other")}

    def rescue(self) -> list[dict[str, Any]]:
        rows = self.queue.rescue()
        for r in rows:
            log.warning("rescued job %s (%s): worker %s stopped heartbeating; now %s", r["id"], r["task"],
                        r["worker_id"], r["state"], extra={"event": "job.rescued", "job_id": r["id"]})
        return rows

    def _complete_retrying(self, wid: int, done: list[int]) -> None:
        """Complete a batch, retrying through short database blips (else the leases expire and the
        jobs are rescued and re-run, which the effect ledger makes harmless)."""
        for attempt in range(5):
            try:
                self.queue.complete(wid, done)
                return
            except StoreError as exc:
                log.warning("completing %d jobs failed: %s", len(done), exc, extra={"event": "worker.complete_failed"})
                if self.stop_requested.wait(min(self.lease_seconds / 4, 0.2 * 2**attempt)):
                    break

    # --- real process -------------------------------------------------------------------------
    def request_stop(self, *_: Any) -> None:
        if not self.stop_requested.is_set():
            log.info("stop requested: no new claims; running jobs get %.0f s to finish", self.grace_seconds,
                     extra={"event": "worker.stopping"})
        self.stop_requested.set()

    def _heartbeat_loop(self, done: threading.Event) -> None:
        interval = max(0.05, self.lease_seconds / 3)
        while not done.wait(interval):
            try:
                with self._holding_lock:
                    ids = list(self._holding)
                self.queue.extend_leases(self.register(), ids, lease_seconds=self.lease_seconds)
                processes.heartbeat(self.store, self.register(), self.clock.now())
            except Exception as exc:  # a blip must not kill the heartbeat; the lease margin absorbs it
                log.warning("heartbeat failed: %s", exc, extra={"event": "worker.heartbeat_failed"})

    def run(self, *, install_signals: bool = True, stop_after: float | None = None) -> dict[str, int]:
        """Work until SIGTERM/SIGINT (or ``stop_after`` seconds); return counts.

        Returns ``{"processed": n, "returned": m}`` — ``returned`` counts jobs
        given back to the queue because they did not finish within the grace period.
        """
        wid = self.register()
        if install_signals:
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        log.info("worker %s started: queues %s, %d slots, batch %d", wid, ",".join(self.queues), self.concurrency,
                 self.batch_size, extra={"event": "worker.started"})
        results: _queue.Queue[tuple[int, bool | BaseException]] = _queue.Queue()
        inbox: _queue.Queue[Job | None] = _queue.Queue()

        def slot() -> None:
            while True:
                job = inbox.get()
                if job is None:
                    return
                try:
                    results.put((job.id, self.execute(job)))
                except BaseException as exc:  # noqa: BLE001 - reported to the main loop
                    results.put((job.id, exc))

        slots = [threading.Thread(target=slot, name=f"oncebeat-slot-{i}", daemon=True) for i in range(self.concurrency)]
        for t in slots:
            t.start()
        hb_done = threading.Event()
        hb = threading.Thread(target=self._heartbeat_loop, args=(hb_done,), name="oncebeat-heartbeat", daemon=True)
        hb.start()
        started = time.monotonic()
        last_rescue = 0.0
        returned = 0
        finished: list[int] = []  # done, completed together with the next claim (one commit per batch)
        try:
            while not self.stop_requested.is_set():
                if stop_after is not None and time.monotonic() - started >= stop_after:
                    break
                try:
                    if time.monotonic() - last_rescue >= self.rescue_interval:
                        last_rescue = time.monotonic()
                        self.rescue()
                    jobs = self.queue.claim(wid, queues=self.queues, limit=self.batch_size,
                                            lease_seconds=self.lease_seconds, complete=finished)
                    finished = []
                except StoreError as exc:  # database away: wait and try again; leases protect held work
                    log.warning("claim failed: %s", exc, extra={"event": "worker.claim_failed"})
                    self.stop_requested.wait(self.poll_interval)
                    continue
                if not jobs:
                    self.stop_requested.wait(self.poll_interval)
                    continue
                with self._holding_lock:
                    self._holding.update(j.id for j in jobs)
                for job in jobs:
                    inbox.put(job)
                pending = {j.id for j in jobs}
                done: list[int] = []
                deadline: float | None = None
                while pending:
                    if self.stop_requested.is_set() and deadline is None:
                        deadline = time.monotonic() + self.grace_seconds
                    timeout = 0.2 if deadline is None else max(0.0, deadline - time.monotonic())
                    try:
                        job_id, outcome = results.get(timeout=timeout)
                    except _queue.Empty:
                        if deadline is not None and time.monotonic() >= deadline:
                            break
                        continue
                    pending.discard(job_id)
                    if isinstance(outcome, BaseException):
                        raise outcome
                    if outcome:
                        done.append(job_id)
                finished = done
                self.processed += len(done)
                if pending:
                    # Grace period over: drop queued-but-unstarted work and give everything back.
                    while True:
                        try:
                            inbox.get_nowait()
                        except _queue.Empty:
                            break
                    returned += len(self.queue.return_jobs(wid, sorted(pending)))
                    log.warning("grace period over: returned %d unfinished jobs to the queue", len(pending),
                                extra={"event": "worker.returned_jobs"})
                with self._holding_lock:
                    self._holding.difference_update(j.id for j in jobs)
        finally:
            hb_done.set()
            for _ in slots:
                inbox.put(None)
        self._complete_retrying(wid, finished)
        self.stop_process()
        log.info("worker %s stopped: %d jobs processed, %d returned", wid, self.processed, returned,
                 extra={"event": "worker.stopped"})
        return {"processed": self.processed, "returned": returned}
