"""The effect ledger: run a side effect at most once per key (G4).

Use it inside a task handler::

    @app.task()
    def send_receipts(ctx, order_ids):
        for order_id in order_ids:          # one in-doubt receipt never stops the others
            ctx.effect(f"receipt:{order_id}", lambda: mailer.send(build(order_id)),
                       payload={"order_id": order_id})

An effect function that knows where its point of no return is says so, and
gets an :class:`EffectAttempt` (with the input frozen at the first attempt)::

    ctx.effect(key, lambda attempt: mailer.send(attempt.frozen, before_final_dot=attempt.point_of_no_return),
               payload=..., freeze=lambda: message_bytes(msg), marks_point_of_no_return=True,
               resource=mailer.reserved())

Rules, in order, for ``run(key, fn)``:

1. If a ``resource`` is given it is entered first: the key is claimed only
   when the resource is ready (e.g. the shared SMTP connection is free), so
   effects waiting for it hold nothing; it is left once ``fn`` returned,
   before the outcome is recorded.
2. The key is claimed atomically (``INSERT … ON CONFLICT DO NOTHING``, never
   select-then-insert). Whoever inserts runs ``fn`` and records ``done`` with
   its (JSON-serialisable) result — together with the done records of the process's other effects that are
   ready at that moment (one transaction: the group commit, :class:`_DoneWriter`); ``run`` returns once its own
   record committed. A new key is claimed by that statement
   alone (its own transaction: one round trip on PostgreSQL); only when it
   inserts nothing does a transaction read the existing key (rules 3-5). With ``freeze``, the effect's input (bytes,
   e.g. the rendered message) is computed and stored with the claim at the
   first attempt; every later attempt of the key — an automatic retry or an
   operator-approved resend — gets exactly those bytes
   (:attr:`EffectAttempt.frozen`), never a re-rendering. A done key drops them.
   Fencing: a caller whose job attempt no longer holds its job with an unexpired lease (checked in the
   claim's transaction) claims nothing, takes nothing over and gets no recorded result:
   :class:`~oncebeat.errors.LeaseLost` is raised and nothing is recorded.
3. A ``done`` key is never run again: its recorded result is returned.
4. A key held (``started``) by a live attempt — same job, same attempt, same
   worker, lease not expired — raises :class:`EffectBusy` (retry later).
5. A ``started`` key whose holder is dead (lease expired, job re-claimed):

   a. if the holder had not passed its **point of no return** (it ran with
      ``marks_point_of_no_return=True`` and died before calling
      :meth:`EffectAttempt.point_of_no_return`: nothing had left yet), the
      new attempt takes the key over and runs ``fn`` — retried, not doubted;
   b. otherwise the effect may or may not have happened: the key is marked
      ``in_doubt`` and never re-run blindly. If a ``reconcile`` hook is given
      it decides: return ``("done", result)`` to record it done,
      ``("not_done", None)`` to run ``fn`` now, or None to leave it in doubt.
      Otherwise :class:`EffectInDoubt` is raised.

   Without ``marks_point_of_no_return`` the point of no return is the claim
   itself (the conservative default: any death inside ``fn`` is in doubt).
6. An ``in_doubt`` key stays in doubt (``EffectInDoubt``) until reconciled or
   resolved by an operator (:meth:`EffectLedger.resolve`, ``oncebeat effects
   resolve KEY done|not_done``, for any key): ``done`` records it and closes
   the jobs that waited on it; ``not_done`` makes the key runnable again and
   runs its job again (the in-doubt job, or a copy of the finished job that
   owned the key), whose done effects come back from the ledger.
7. Reusing a key with a different payload raises :class:`EffectKeyConflict`
   at once, recorded as an ``effect.conflict`` event with both payload hashes
   (the doctor reports it). It is never retried: a key must name one effect.

Inside a job, :meth:`oncebeat.worker.JobContext.effect` skips an in-doubt or
conflicting key by default (it returns None and the job goes on with its other
effects); the job then ends ``in_doubt`` (naming its in-doubt keys) or
``discarded`` (naming its conflicts) instead of ``completed``.

If ``fn`` raises :class:`~oncebeat.errors.EffectOutcomeUnknown` the key is
recorded ``in_doubt`` at once (e.g. the SMTP connection dropped after the
final ``.``, before the reply). If ``fn`` raises anything else, the attempt is
recorded ``failed`` with the error and the key may be claimed again by a later
attempt (the effect did not happen — that is ``fn``'s contract: raise only
when the effect certainly did not happen, e.g. a refused SMTP connection).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import audit, queue, telemetry
from .errors import (
    EffectBusy,
    EffectInDoubt,
    EffectKeyConflict,
    EffectOutcomeUnknown,
    LeaseLost,
    TransientStoreError,
)
from .provenance import Source
from .store import Json, Store, Tx
from .timebase import Clock

__all__ = ["EffectAttempt", "EffectLedger", "Holder", "OnDone", "Reconcile", "Resolution", "list_effects",
           "payload_hash"]

log = logging.getLogger("oncebeat.effects")

RECORD_ATTEMPTS = 5  # tries to record a done effect through transient store errors
UNFINISHED_JOB_STATES = ("available", "scheduled", "running", "retryable")

Reconcile = Callable[[str, Any], "tuple[str, Any] | None"]
OnDone = Callable[[Tx, Any], None]  # (the transaction recording ``done``, fn's result)


def list_effects(db: Store | Tx, *, state: str | None = None) -> list[dict[str, Any]]:
    """Every ledger row (or those in ``state``: started|done|in_doubt|failed), oldest ``started_at`` first.

    For checks over a whole run (the doctor, the simulator's checker); pages for people come from
    :meth:`EffectLedger.list_page`.
    """
    return db.read("list_effects", state=state)


def payload_hash(payload: Any) -> str:
    """Stable hash of a JSON-serialisable payload (sorted keys)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True, slots=True)
class Holder:
    """The attempt that runs an effect: job id, attempt number and worker (process) id."""

    job_id: int | None
    attempt: int | None
    process_id: int | None


@dataclass(kw_only=True, slots=True)
class EffectAttempt:
    """What an effect function gets when it runs with ``freeze`` or ``marks_point_of_no_return``.

    Attributes:
        key: the effect key.
        frozen: the input frozen at the key's first attempt (bytes), or None without ``freeze``.
        taken_over: this attempt took the key over from an earlier one (it had failed, died before its point
            of no return, or was reconciled ``not_done``); False when this attempt's claim created the key.
            A caller that checks whether the effect is still wanted only after an earlier attempt need not
            read the ledger before the claim.
    """

    key: str
    frozen: bytes | None
    taken_over: bool = False
    _ledger: EffectLedger
    _holder: Holder

    def point_of_no_return(self) -> None:
        """Record durably that the effect may happen from now on; call it right before the irreversible step.

        Before this call a dead holder's key is retried automatically; after it, in doubt.

        Raises:
            EffectBusy: this attempt no longer holds the key (another attempt took it over): do not go on.
            StoreError: the mark could not be written: do not go on (the effect has not happened).
        """
        self._ledger._mark_no_return(self.key, self._holder)


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolution:
    """What an operator's decision on an in-doubt key changed.

    Attributes:
        key: the effect key; outcome: ``done`` or ``not_done``.
        rerun_job_id: the job that will run the effect again (``not_done``), if any.
        closed_job_ids: in-doubt jobs that waited only on resolved keys and are now ``completed``.
    """

    key: str
    outcome: str
    rerun_job_id: int | None = None
    closed_job_ids: tuple[int, ...] = field(default=())

    def sentence(self) -> str:
        """One line for the operator, e.g. ``receipt:7: resolved not_done; job 42 will run it again``."""
        text = f"{self.key}: resolved {self.outcome}"
        if self.rerun_job_id is not None:
            text += f"; job {self.rerun_job_id} will run it again (its done effects are not repeated)"
        elif self.outcome == "not_done":
            text += "; the next run of its job will run it"
        if self.closed_job_ids:
            text += "; completed job(s) " + ", ".join(str(j) for j in self.closed_job_ids)
        return text


class EffectLedger:
    def __init__(self, store: Store, *, clock: Clock, source: Source) -> None:
        self.store = store
        self.clock = clock
        self.source = source
        self._done = _DoneWriter(self._write_done)

    def run(self, key: str, fn: Callable[..., Any], *, holder: Holder, payload: Any = None,
            reconcile: Reconcile | None = None, freeze: Callable[[], bytes] | None = None,
            marks_point_of_no_return: bool = False,
            resource: AbstractContextManager[Any] | None = None, on_done: OnDone | None = None) -> Any:
        """Run ``fn`` once for ``key`` (see module docstring); return its result or the recorded one.

        ``on_done(tx, result)`` runs inside the transaction that records the key ``done`` after ``fn``
        returned, so the caller's own record of the effect (e.g. a reminder marked sent) commits with it:
        no crash can fall between the two. It is not called when the key was already done (the earlier
        attempt's ``on_done`` committed then) nor on a reconcile. If it raises, the record rolls back and
        the key stays ``started`` (a later attempt finds it in doubt: the effect did happen). The done records
        of the process's concurrent effects are written together (group commit, :class:`_DoneWriter`), so
        ``on_done`` may run in another thread, in one transaction with other keys' records, and once more alone
        if that transaction rolled back: it must only write through ``tx`` (no effect of its own). It does not
        run when the ledger refuses the record (the key was found in doubt or resolved meanwhile): ``LeaseLost``.

        Args:
            fn: the effect; called with no argument, or with an :class:`EffectAttempt` when ``freeze`` or
                ``marks_point_of_no_return`` is given.
            freeze: computes the effect's input (bytes) at the first attempt; stored with the key.
            marks_point_of_no_return: ``fn`` calls ``attempt.point_of_no_return()`` right before the step that
                cannot be undone; a holder that died before it is retried, not in doubt.
            resource: entered before the key is claimed, left when ``fn`` returned (before recording).

        Raises:
            EffectBusy: another live attempt holds the key.
            EffectInDoubt: a dead attempt may have run it; not re-run.
            EffectKeyConflict: same key, different payload (recorded as an ``effect.conflict`` event).
            LeaseLost: the holder's job attempt no longer holds its job with a live lease (nothing recorded), or,
                after ``fn`` ran, the key was no longer this attempt's when its done record was written (refused).
            Exception: whatever ``fn`` raised (the key is then recorded ``failed``).
        """
        telemetry.emit("effect.requested", {"key": key})  # a death here claimed nothing: nothing to doubt
        with resource if resource is not None else nullcontext():
            ran, result = self._run(key, fn, holder, payload, reconcile, freeze, marks_point_of_no_return)
        if ran:  # recorded after the resource is free: the next effect need not wait for this commit
            self._record_done(key, holder, result, on_done)
        return result

    def _run(self, key: str, fn: Callable[..., Any], holder: Holder, payload: Any, reconcile: Reconcile | None,
             freeze: Callable[[], bytes] | None, marks: bool) -> tuple[bool, Any]:
        """Claim and run; return (True, fn's result) when ``fn`` ran (to be recorded), else (False, the result)."""
        digest = payload_hash(payload)
        staged = marks or freeze is not None
        frozen = freeze() if freeze is not None else None
        now = self.clock.now()
        no_return_at = None if marks else now
        row: dict[str, Any] | None = None
        claimed = self._claim_alone(key, digest, holder, now, no_return_at, frozen)
        if claimed is not None:  # a new key, claimed by its own statement: no transaction to read what is there
            return self._claimed(key, fn, holder, claimed, frozen, staged, taken_over=False)
        try:
            with self.store.transaction() as tx:
                claimed = self._claim(tx, key, digest, holder, now, no_return_at, frozen)
                row = None if claimed else tx.one("effect_get", key=key)
                if row is not None:
                    taken = self._decide_existing(tx, key, digest, row, holder, now, no_return_at, frozen)
                    if taken is not None:
                        claimed = taken
        except EffectKeyConflict as conflict:
            self._record_conflict(conflict, holder)
            raise
        if row is not None and not claimed:
            if row["state"] == "done":
                return False, row["result"]
            return self._in_doubt(key, fn, holder, payload, reconcile, row, staged, marks, frozen)
        return self._claimed(key, fn, holder, claimed, frozen, staged, taken_over=row is not None)

    def _claimed(self, key: str, fn: Callable[..., Any], holder: Holder, claimed: dict[str, Any] | None,
                 frozen: bytes | None, staged: bool, *, taken_over: bool) -> tuple[bool, Any]:
        """Run ``fn`` for a key this holder just claimed (``claimed``: the claim's or take-over's row)."""
        if claimed and claimed.get("frozen") is not None:
            frozen = bytes(claimed["frozen"])  # the input frozen at the first attempt wins over today's rendering
        attempt = self._attempt(key, holder, frozen, taken_over=taken_over) if staged else None
        return True, self._call(key, fn, holder, attempt)

    def _claim_alone(self, key: str, digest: str, holder: Holder, now: datetime, no_return_at: datetime | None,
                     frozen: bytes | None) -> dict[str, Any] | None:
        """The common case first: claim a key nobody has claimed yet with one statement that is its own
        transaction (:meth:`.Store.run_alone`; on PostgreSQL one round trip instead of ``BEGIN``, claim,
        ``COMMIT``: issue 27). Fenced as :meth:`_claim` (the same statement, ``effect_claim_current``, whose
        lease check and insert are atomic in it). Returns the new row's ``key``, or None: the key exists, the
        attempt lost its job, or the connection died (the store does not run a claim again) — then
        :meth:`_run`'s transaction decides exactly as before: it claims again (``ON CONFLICT DO NOTHING``), reads
        the existing row, takes it over, or raises ``LeaseLost``. A claim that committed although its reply was
        lost is then found started by this live attempt: ``EffectBusy`` (the job is retried after a lease), and
        the job's next attempt decides as for any dead holder: an effect that marks its point of no return never
        reached it and is taken over; one that does not is in doubt — as after a claim transaction whose
        ``COMMIT`` reply was lost. Never a second effect."""
        params = dict(key=key, payload_hash=digest, job_id=holder.job_id, attempt=holder.attempt,
                      process_id=holder.process_id, now=now, no_return_at=no_return_at, frozen=frozen,
                      **self.source.params())
        try:
            if holder.job_id is None:  # outside a job: nothing to fence
                rows = self.store.run_alone("effect_claim", **params)
            else:
                rows = self.store.run_alone("effect_claim_current", worker_id=holder.process_id, **params)
        except TransientStoreError:
            return None
        return rows[0] if rows else None

    def _claim(self, tx: Tx, key: str, digest: str, holder: Holder, now: datetime, no_return_at: datetime | None,
               frozen: bytes | None) -> dict[str, Any] | None:
        """Claim ``key`` for ``holder`` in ``tx``, fenced (:meth:`_require_current`); the new row's ``key``, or
        None when the key already exists. The fence and the insert are one statement (``effect_claim_current``:
        a round trip per effect fewer); only when it inserts nothing is the fence read on its own, to tell a lost
        job from an existing key.

        Raises:
            LeaseLost: as :meth:`_require_current`.
        """
        params = dict(key=key, payload_hash=digest, job_id=holder.job_id, attempt=holder.attempt,
                      process_id=holder.process_id, now=now, no_return_at=no_return_at, frozen=frozen,
                      **self.source.params())
        if holder.job_id is None:  # outside a job: nothing to fence
            return tx.one("effect_claim", **params)
        claimed = tx.one("effect_claim_current", worker_id=holder.process_id, **params)
        if claimed is None:
            self._require_current(tx, key, holder, now)
        return claimed

    @staticmethod
    def _require_current(tx: Tx, key: str, holder: Holder, now: datetime) -> None:
        """Fencing: refuse to claim ``key`` for a job attempt that no longer holds its job with a live lease.

        Raises:
            LeaseLost: the job was rescued, re-claimed, finished, or its lease expired.
        """
        if holder.job_id is None:
            return  # an effect run outside a job (API, scripts): no lease to check
        if tx.one("effect_holder_current", job_id=holder.job_id, attempt=holder.attempt,
                  worker_id=holder.process_id, now=now) is None:
            raise LeaseLost(holder.job_id, holder.attempt, f"not starting effect {key!r}: this attempt no longer "
                            "holds the job with an unexpired lease")

    def _attempt(self, key: str, holder: Holder, frozen: bytes | None, *, taken_over: bool) -> EffectAttempt:
        return EffectAttempt(key=key, frozen=frozen, taken_over=taken_over, _ledger=self, _holder=holder)

    def _decide_existing(self, tx: Tx, key: str, digest: str, row: dict[str, Any], holder: Holder, now: datetime,
                         no_return_at: datetime | None, frozen: bytes | None) -> dict[str, Any] | None:
        """Decide on an existing row inside the claim transaction; return the taken-over row or None."""
        if row["payload_hash"] != digest:
            raise EffectKeyConflict(key, row["payload_hash"], digest)
        state = row["state"]
        if state == "failed":
            # The earlier attempt recorded that the effect did not happen: this attempt may run it.
            return tx.one("effect_take_over", key=key, from_state="failed", job_id=holder.job_id,
                          attempt=holder.attempt, process_id=holder.process_id, now=now, detail=None,
                          no_return_at=no_return_at, frozen=frozen)
        if state != "started":
            return None
        alive = row["job_id"] is not None and tx.one(
            "job_holder_alive", job_id=row["job_id"], attempt=row["attempt"], worker_id=row["process_id"],
            now=now) is not None
        if alive:
            raise EffectBusy(f"effect {key!r} is being run by job {row['job_id']} attempt {row['attempt']}")
        who = f"attempt {row['attempt']} of job {row['job_id']} (worker {row['process_id']})"
        if row.get("no_return_at") is None:
            # Rule 5a: the dead holder never reached its point of no return, so nothing left: retry it.
            detail = f"{who} died before its point of no return; retried by attempt {holder.attempt}"
            taken = tx.one("effect_take_over", key=key, from_state="started", job_id=holder.job_id,
                           attempt=holder.attempt, process_id=holder.process_id, now=now, detail=detail,
                           no_return_at=no_return_at, frozen=frozen)
            audit.record(tx, now=now, kind="effect.retried", subject=f"effect:{key}", source=self.source,
                         process_id=holder.process_id, detail={"detail": detail, "job_id": row["job_id"]})
            return taken
        detail = (f"{who} started it at {row['started_at'].isoformat()} and died before recording the outcome "
                  "(after its point of no return)")
        tx.run("effect_mark_in_doubt", key=key, detail=detail, now=now)
        audit.record(tx, now=now, kind="effect.in_doubt", subject=f"effect:{key}", source=self.source,
                     process_id=holder.process_id, detail={"detail": detail, "job_id": row["job_id"]})
        row["state"] = "in_doubt"
        row["detail"] = detail
        return None

    def _record_conflict(self, conflict: EffectKeyConflict, holder: Holder) -> None:
        now = self.clock.now()
        with self.store.transaction() as tx:
            audit.record(tx, now=now, kind="effect.conflict", subject=f"effect:{conflict.key}", source=self.source,
                         process_id=holder.process_id,
                         detail={"key": conflict.key, "first_payload_hash": conflict.first_payload_hash,
                                 "payload_hash": conflict.payload_hash, "job_id": holder.job_id,
                                 "attempt": holder.attempt})
        log.error("%s (job %s)", conflict, holder.job_id, extra={"event": "effect.conflict", "job_id": holder.job_id})

    def _mark_no_return(self, key: str, holder: Holder) -> None:
        # One statement, its own transaction, that the store may safely run again (a repeat sets the mark of the
        # same holder's started key, or finds it no longer held): on PostgreSQL one round trip instead of three.
        ok = self.store.run_idempotent("effect_no_return", key=key, now=self.clock.now(), job_id=holder.job_id,
                                       attempt=holder.attempt)
        if not ok:
            raise EffectBusy(f"effect {key!r} is no longer held by job {holder.job_id} attempt {holder.attempt}; "
                             "not going past the point of no return")
        telemetry.emit("effect.no_return", {"key": key})

    def _call(self, key: str, fn: Callable[..., Any], holder: Holder, attempt: EffectAttempt | None) -> Any:
        """Run ``fn``; record ``in_doubt`` (outcome unknown) or ``failed`` (it raised) — the caller records done."""
        try:
            return fn(attempt) if attempt is not None else fn()
        except EffectOutcomeUnknown as exc:
            detail = f"outcome unknown: {exc}"
            with self.store.transaction() as tx:
                tx.run("effect_mark_in_doubt", key=key, detail=detail[:2000], now=self.clock.now())
                audit.record(tx, now=self.clock.now(), kind="effect.in_doubt", subject=f"effect:{key}",
                             source=self.source, process_id=holder.process_id,
                             detail={"detail": detail[:500], "job_id": holder.job_id})
            raise EffectInDoubt(key, detail) from exc
        except BaseException as exc:
            if isinstance(exc, Exception):
                with self.store.transaction() as tx:
                    tx.run("effect_finish", key=key, from_state="started", state="failed", result=Json(None),
                           detail=f"{type(exc).__name__}: {exc}"[:2000], now=self.clock.now(),
                           job_id=holder.job_id, attempt=holder.attempt)
            raise

    def _record_done(self, key: str, holder: Holder, result: Any, on_done: OnDone | None = None) -> None:
        """Record ``key`` done (with ``on_done``'s record) through the group commit; return once it committed.

        Raises:
            LeaseLost: the key is no longer this attempt's (another attempt found it in doubt, or an operator
                resolved it): the ledger refused the record and ``on_done`` did not run.
            StoreError: the record could not be written (the key stays ``started``: a later attempt finds it in
                doubt); whatever ``on_done`` raised.
        """
        telemetry.emit("effect.performed", {"key": key})
        self._done.write(_Done(key=key, holder=holder, result=result, on_done=on_done))
        telemetry.emit("effect.recorded", {"key": key, "state": "done"})

    def _write_done(self, batch: list[_Done]) -> None:
        """Write the done records of ``batch`` in one transaction, retried through transient store errors.

        Each record's ``effect_finish`` is fenced by its holder (state ``started``, same job and attempt): a
        record the ledger refuses gets :class:`LeaseLost` (or finds it already committed by this holder, when
        a lost ``COMMIT`` reply made us try again) and its ``on_done`` does not run; the others commit.
        """
        # The effects happened: recording them must survive a database blip, or the keys end in doubt.
        for tries in range(RECORD_ATTEMPTS):
            for done in batch:
                done.error = None
            try:
                with self.store.transaction() as tx:
                    now = self.clock.now()
                    for done in batch:
                        h = done.holder
                        if tx.run("effect_finish", key=done.key, from_state="started", state="done",
                                  result=Json(done.result), detail=None, now=now, job_id=h.job_id,
                                  attempt=h.attempt):
                            if done.on_done is not None:
                                done.on_done(tx, done.result)
                        else:
                            done.error = self._refused(tx, done)
                return
            except TransientStoreError:
                if tries == RECORD_ATTEMPTS - 1:
                    raise
                self.clock.sleep(0.05 * 2**tries)

    @staticmethod
    def _refused(tx: Tx, done: _Done) -> BaseException | None:
        """Why the ledger did not move ``done``'s key from ``started`` to ``done``: None when this holder's record
        is already there (a try whose ``COMMIT`` reply was lost), else the error its owner gets."""
        row = tx.one("effect_get", key=done.key)
        h = done.holder
        if row is not None and row["state"] == "done" and row["job_id"] == h.job_id and row["attempt"] == h.attempt:
            return None
        state = row["state"] if row is not None else "gone"
        why = f"effect {done.key!r} is {state} and no longer held by this attempt; its done record was refused"
        if h.job_id is None:
            return EffectBusy(why)
        return LeaseLost(h.job_id, h.attempt, why)

    def _in_doubt(self, key: str, fn: Callable[..., Any], holder: Holder, payload: Any,
                  reconcile: Reconcile | None, row: dict[str, Any], staged: bool, marks: bool,
                  frozen: bytes | None) -> tuple[bool, Any]:
        if reconcile is not None:
            verdict = reconcile(key, payload)
            if verdict is not None:
                outcome, result = verdict
                now = self.clock.now()
                taken: dict[str, Any] | None = None
                with self.store.transaction() as tx:
                    if outcome == "not_done":
                        self._require_current(tx, key, holder, now)
                    if outcome == "done":
                        tx.run("effect_finish", key=key, from_state="in_doubt", state="done", result=Json(result),
                               detail="reconciled: it had happened", now=now, job_id=row["job_id"],
                               attempt=row["attempt"])
                    elif outcome == "not_done":
                        taken = tx.one("effect_take_over", key=key, from_state="in_doubt", job_id=holder.job_id,
                                       attempt=holder.attempt, process_id=holder.process_id, now=now,
                                       detail="reconciled: it had not happened; running again",
                                       no_return_at=None if marks else now, frozen=frozen)
                    else:
                        raise ValueError(f"reconcile hook returned {outcome!r}; use 'done' or 'not_done'")
                    audit.record(tx, now=now, kind="effect.reconciled", subject=f"effect:{key}", source=self.source,
                                 process_id=holder.process_id, detail={"outcome": outcome})
                if outcome == "done":
                    return False, result
                if taken is not None and taken.get("frozen") is not None:
                    frozen = bytes(taken["frozen"])
                attempt = self._attempt(key, holder, frozen, taken_over=True) if staged else None
                return True, self._call(key, fn, holder, attempt)
        raise EffectInDoubt(key, str(row.get("detail") or ""))

    def list_page(self, *, state: str | None = "in_doubt", after: tuple[datetime, str] | None = None,
             limit: int = 50) -> list[dict[str, Any]]:
        """Ledger rows oldest first (the longest-waiting decision on top), ``limit`` per page.

        Keyset pagination: pass the last row's ``(started_at, key)`` as ``after``.
        """
        return self.store.read("list_effects_page", state=state, after_at=after[0] if after else None,
                               after_key=after[1] if after else None, limit=limit)

    def of_job(self, job_id: int) -> list[dict[str, Any]]:
        """The effects a job's attempts claimed (every state)."""
        return self.store.read("effects_of_job", job_id=job_id)

    def counts_unfinished(self) -> dict[str, int]:
        """Effects per state other than ``done`` (``started``, ``in_doubt``, ``failed``), from a partial index."""
        return {r["state"]: int(r["n"]) for r in self.store.read("count_unfinished_effects")}

    def get(self, key: str) -> dict[str, Any] | None:
        """The ledger row of ``key`` (state started|done|in_doubt|failed, result, detail, no_return_at, frozen),
        or None."""
        rows = self.store.read("effect_get", key=key)
        return rows[0] if rows else None

    def resolve(self, key: str, outcome: str, result: Any = None, *, tx: Tx | None = None) -> Resolution | None:
        """Operator decision on an in-doubt key, for any key: ``done`` (it happened) or ``not_done`` (run it again).

        ``done`` records the key done. ``not_done`` makes it runnable again and runs its job again: the
        in-doubt job that named it (the key's owner first) goes back to ``available``, or, when the job
        that owned the key has finished otherwise, a copy of it is enqueued; its done effects come back
        from the ledger. In-doubt jobs left with no unresolved key end ``completed``.

        Args:
            tx: resolve inside the caller's transaction (so a domain update commits with it).
        Returns:
            What changed, or None if the key is unknown or not in doubt.
        Raises:
            ValueError: ``outcome`` is neither ``done`` nor ``not_done``.
        """
        if outcome not in ("done", "not_done"):
            raise ValueError("outcome must be 'done' or 'not_done'")
        if tx is None:
            with self.store.transaction() as own:
                return self.resolve(key, outcome, result, tx=own)
        now = self.clock.now()
        row = tx.one("effect_get", key=key)
        if row is None or row["state"] != "in_doubt":
            return None
        happened = outcome == "done"
        tx.run("effect_finish", key=key, from_state="in_doubt", state="done" if happened else "failed",
               result=Json(result if happened else None),
               detail=f"resolved by operator: it had {'' if happened else 'not '}happened", now=now,
               job_id=row["job_id"], attempt=row["attempt"])
        audit.record(tx, now=now, kind="effect.reconciled", subject=f"effect:{key}", source=self.source,
                     detail={"outcome": outcome, "by": "operator"})
        waiting = [j for j in queue.jobs_in_doubt(tx) if key in _in_doubt_keys(j)]
        rerun = None if happened else self._rerun(tx, key, row, waiting, now)
        entry = {"at": now.isoformat(), "kind": "resolved", "error": f"effect {key} resolved {outcome} by operator"}
        closed = []
        for job in waiting:
            if job["id"] == rerun:
                continue
            open_keys = [k for k in _in_doubt_keys(job) if k != key and _state(tx, k) == "in_doubt"]
            if not open_keys and queue.close_in_doubt(tx, job["id"], now=now, entry=entry):
                closed.append(int(job["id"]))
        return Resolution(key=key, outcome=outcome, rerun_job_id=rerun, closed_job_ids=tuple(closed))

    def _rerun(self, tx: Tx, key: str, row: dict[str, Any], waiting: list[dict[str, Any]],
               now: datetime) -> int | None:
        """Run the key's job again after a ``not_done``; return the job id that will run it (None: none needed)."""
        entry = {"at": now.isoformat(), "kind": "resolved",
                 "error": f"effect {key} resolved not_done by operator; running the job again"}
        owner = row["job_id"]
        for job in sorted(waiting, key=lambda j: j["id"] != owner):  # the key's owner first
            if queue.rerun_in_doubt(tx, job["id"], now=now, entry=entry):
                audit.record(tx, now=now, kind="job.rerun", subject=f"job:{job['id']}", source=self.source,
                             detail={"effect": key})
                return int(job["id"])
        if owner is None or waiting:
            return None  # no job owns it, or an unfinished job with the same unique key will run it
        owner_job = queue.job_row(tx, owner)
        if owner_job is None or owner_job["state"] in UNFINISHED_JOB_STATES:
            return None  # pruned, or it has not finished: its next attempt runs the effect
        copy = queue.copy_job(tx, owner, now=now, source=self.source)
        if copy is None:
            return None
        audit.record(tx, now=now, kind="job.rerun", subject=f"job:{copy}", source=self.source,
                     detail={"effect": key, "copy_of": owner})
        return copy


@dataclass(kw_only=True, slots=True)
class _Done:
    """One done record waiting for the group commit: the key, its holder, ``fn``'s result, the caller's
    ``on_done``; ``error`` and ``written`` are set by the writer."""

    key: str
    holder: Holder
    result: Any
    on_done: OnDone | None
    error: BaseException | None = None
    written: bool = False


class _DoneWriter:
    """Group commit of done records: the concurrent effects of one process (a worker's slots) whose ``fn``
    returned are recorded together, one transaction for those that are ready at that moment (issue 27).

    A thread with a record to write writes it at once when no write is under way, together with whatever
    others wait by then (it leads that write); otherwise it waits, and the first waiter leads the next write
    when the current one ends. No fixed delay: alone, a record is written as soon as it is handed over, as
    before. Every caller returns (or raises) only once its own record committed or failed, so a job is
    completed only after its done records committed. A process killed during a write leaves every key of that
    write ``started`` past its point of no return: in doubt, never sent again (G4) — at most one key per
    thread that was waiting, as without the group commit.

    A write that raises a non-transient error (one ``on_done`` failing) rolls back; each of its records is
    then written again alone, so one record's failure reaches only its own caller.
    """

    def __init__(self, write: Callable[[list[_Done]], None]) -> None:
        self._write = write
        self._cond = threading.Condition(threading.Lock())
        self._waiting: list[_Done] = []
        self._writing = False

    def write(self, done: _Done) -> None:
        """Write ``done`` (with those waiting); return once it committed, or raise its own error."""
        with self._cond:
            self._waiting.append(done)
            while not done.written and self._writing:
                self._cond.wait()
            if done.written:  # another thread's write carried it
                if done.error is not None:
                    raise done.error
                return
            self._writing = True
            batch, self._waiting = self._waiting, []
        try:
            self._lead(batch)
        finally:
            with self._cond:
                for each in batch:
                    each.written = True
                self._writing = False
                self._cond.notify_all()
        if done.error is not None:
            raise done.error

    def _lead(self, batch: list[_Done]) -> None:
        """Write ``batch``; leave each record's own error on it (a crash of the 'process' reaches them all)."""
        try:
            telemetry.emit("effect.batch", {"keys": [d.key for d in batch]})  # crash point done_batch
            try:
                self._write(batch)
            except TransientStoreError as exc:  # the database is away: nothing of this write committed
                for each in batch:
                    each.error = exc
            except Exception as exc:  # noqa: BLE001 - one record failed and rolled the write back: each alone
                if len(batch) == 1:
                    batch[0].error = exc
                    return
                for each in batch:
                    try:
                        self._write([each])
                    except Exception as alone:  # noqa: BLE001 - that record's caller gets it
                        each.error = alone
        except BaseException as death:  # SimulatedCrash (in-process kill -9): none of the batch was recorded
            for each in batch:
                each.error = death
            raise


def _in_doubt_keys(job: dict[str, Any]) -> list[str]:
    """The effect keys an ``in_doubt`` job named (its last ``in_doubt`` error entry)."""
    for entry in reversed(job.get("errors") or []):
        if entry.get("kind") == "in_doubt":
            return [str(k) for k in entry.get("keys") or []]
    return []


def _state(tx: Tx, key: str) -> str | None:
    row = tx.one("effect_get", key=key)
    return None if row is None else str(row["state"])
