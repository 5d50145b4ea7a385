"""The effect ledger: run a side effect at most once per key (G4).

Use it inside a task handler::

    @app.task()
    def send_receipt(ctx, order_id):
        ctx.effect(f"receipt:{order_id}", lambda: mailer.send(build(order_id)),
                   payload={"order_id": order_id})

Rules, in order, for ``run(key, fn)``:

1. The key is claimed atomically (``INSERT … ON CONFLICT DO NOTHING``, never
   select-then-insert). Whoever inserts runs ``fn`` and records ``done`` with
   its (JSON-serialisable) result.
2. A ``done`` key is never run again: its recorded result is returned.
3. A key held (``started``) by a live attempt — same job, same attempt, same
   worker, lease not expired — raises :class:`EffectBusy` (retry later).
4. A ``started`` key whose holder is dead (lease expired, job re-claimed) is
   **in doubt**: the effect may or may not have happened. It is marked
   ``in_doubt`` and never re-run blindly. If a ``reconcile`` hook is given it
   decides: return ``("done", result)`` to record it done, ``("not_done",
   None)`` to run ``fn`` now, or None to leave it in doubt. Otherwise
   :class:`EffectInDoubt` is raised for the handler (and operator) to handle.
5. An ``in_doubt`` key stays in doubt (``EffectInDoubt``) until reconciled.
6. Reusing a key with a different payload raises :class:`EffectKeyConflict`.

If ``fn`` raises :class:`~oncebeat.errors.EffectOutcomeUnknown` the key is
recorded ``in_doubt`` at once (e.g. the SMTP connection dropped after the
message was sent, before the reply). If ``fn`` raises anything else, the attempt is recorded ``failed`` with the error and the
key may be claimed again by a later attempt (the effect did not happen —
that is ``fn``'s contract: raise only when the effect certainly did not happen,
e.g. a refused SMTP connection).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import audit, telemetry
from .errors import (
    EffectBusy,
    EffectInDoubt,
    EffectKeyConflict,
    EffectOutcomeUnknown,
    TransientStoreError,
)
from .provenance import Source
from .store import Json, Store, Tx
from .timebase import Clock

__all__ = ["EffectLedger", "Holder", "OnDone", "Reconcile", "payload_hash"]

RECORD_ATTEMPTS = 5  # tries to record a done effect through transient store errors

Reconcile = Callable[[str, Any], "tuple[str, Any] | None"]
OnDone = Callable[[Tx, Any], None]  # (the transaction recording ``done``, fn's result)


def payload_hash(payload: Any) -> str:
    """Stable hash of a JSON-serialisable payload (sorted keys)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True, slots=True)
class Holder:
    """The attempt that runs an effect: job id, attempt number and worker (process) id."""

    job_id: int | None
    attempt: int | None
    process_id: int | None


class EffectLedger:
    def __init__(self, store: Store, *, clock: Clock, source: Source) -> None:
        self.store = store
        self.clock = clock
        self.source = source

    def run(self, key: str, fn: Callable[[], Any], *, holder: Holder, payload: Any = None,
            reconcile: Reconcile | None = None, on_done: OnDone | None = None) -> Any:
        """Run ``fn`` once for ``key`` (see module docstring); return its result or the recorded one.

        ``on_done(tx, result)`` runs inside the transaction that records the key ``done`` after ``fn``
        returned, so the caller's own record of the effect (e.g. a reminder marked sent) commits with it:
        no crash can fall between the two. It is not called when the key was already done (the earlier
        attempt's ``on_done`` committed then) nor on a reconcile. If it raises, the record rolls back and
        the key stays ``started`` (a later attempt finds it in doubt: the effect did happen).

        Raises:
            EffectBusy: another live attempt holds the key.
            EffectInDoubt: a dead attempt may have run it; not re-run.
            EffectKeyConflict: same key, different payload.
            Exception: whatever ``fn`` raised (the key is then recorded ``failed``).
        """
        telemetry.emit("effect.requested", {"key": key})  # a death here claimed nothing: nothing to doubt
        digest = payload_hash(payload)
        now = self.clock.now()
        with self.store.transaction() as tx:
            claimed = tx.one("effect_claim", key=key, payload_hash=digest, job_id=holder.job_id,
                             attempt=holder.attempt, process_id=holder.process_id, now=now, **self.source.params())
            row = None if claimed else tx.one("effect_get", key=key)
            if row is not None:
                decision = self._decide_existing(tx, key, digest, row, holder, now)
                if decision == "take_over":
                    claimed = {"key": key}
        if row is not None and not claimed:
            if row["state"] == "done":
                return row["result"]
            return self._in_doubt(key, fn, holder, payload, reconcile, row)
        return self._execute(key, fn, holder, on_done)

    def _decide_existing(self, tx: Any, key: str, digest: str, row: dict[str, Any], holder: Holder, now: Any) -> str:
        if row["payload_hash"] != digest:
            raise EffectKeyConflict(
                f"effect key {key!r} was first used with a different payload; a key must name one effect")
        state = row["state"]
        if state == "done":
            return "done"
        if state == "failed":
            # The earlier attempt recorded that the effect did not happen: this attempt may run it.
            tx.run("effect_take_over", key=key, from_state="failed", job_id=holder.job_id, attempt=holder.attempt,
                   process_id=holder.process_id, now=now, detail=None)
            return "take_over"
        if state == "started":
            alive = row["job_id"] is not None and tx.one(
                "job_holder_alive", job_id=row["job_id"], attempt=row["attempt"], worker_id=row["process_id"],
                now=now) is not None
            if alive:
                raise EffectBusy(f"effect {key!r} is being run by job {row['job_id']} attempt {row['attempt']}")
            detail = (f"attempt {row['attempt']} of job {row['job_id']} (worker {row['process_id']}) started it at "
                      f"{row['started_at'].isoformat()} and died before recording the outcome")
            tx.run("effect_mark_in_doubt", key=key, detail=detail, now=now)
            audit.record(tx, now=now, kind="effect.in_doubt", subject=f"effect:{key}", source=self.source,
                         process_id=holder.process_id, detail={"detail": detail, "job_id": row["job_id"]})
            row["state"] = "in_doubt"
            row["detail"] = detail
        return "in_doubt"

    def _execute(self, key: str, fn: Callable[[], Any], holder: Holder, on_done: OnDone | None = None) -> Any:
        try:
            result = fn()
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
        telemetry.emit("effect.performed", {"key": key})
        # The effect happened: recording it must survive a database blip, or the key ends in doubt.
        for attempt in range(RECORD_ATTEMPTS):
            try:
                with self.store.transaction() as tx:
                    tx.run("effect_finish", key=key, from_state="started", state="done", result=Json(result),
                           detail=None, now=self.clock.now(), job_id=holder.job_id, attempt=holder.attempt)
                    if on_done is not None:
                        on_done(tx, result)
                break
            except TransientStoreError:
                if attempt == RECORD_ATTEMPTS - 1:
                    raise
                self.clock.sleep(0.05 * 2**attempt)
        telemetry.emit("effect.recorded", {"key": key, "state": "done"})
        return result

    def _in_doubt(self, key: str, fn: Callable[[], Any], holder: Holder, payload: Any,
                  reconcile: Reconcile | None, row: dict[str, Any]) -> Any:
        if reconcile is not None:
            verdict = reconcile(key, payload)
            if verdict is not None:
                outcome, result = verdict
                now = self.clock.now()
                with self.store.transaction() as tx:
                    if outcome == "done":
                        tx.run("effect_finish", key=key, from_state="in_doubt", state="done", result=Json(result),
                               detail="reconciled: it had happened", now=now, job_id=row["job_id"],
                               attempt=row["attempt"])
                    elif outcome == "not_done":
                        tx.run("effect_take_over", key=key, from_state="in_doubt", job_id=holder.job_id,
                               attempt=holder.attempt, process_id=holder.process_id, now=now,
                               detail="reconciled: it had not happened; running again")
                    else:
                        raise ValueError(f"reconcile hook returned {outcome!r}; use 'done' or 'not_done'")
                    audit.record(tx, now=now, kind="effect.reconciled", subject=f"effect:{key}", source=self.source,
                                 process_id=holder.process_id, detail={"outcome": outcome})
                if outcome == "done":
                    return result
                return self._execute(key, fn, holder)
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
        """The ledger row of ``key`` (state started|done|in_doubt|failed, result, detail), or None."""
        rows = self.store.read("effect_get", key=key)
        return rows[0] if rows else None

    def resolve(self, key: str, outcome: str, result: Any = None, *, tx: Tx | None = None) -> bool:
        """Operator decision on an in-doubt key: ``done`` (it happened) or ``not_done`` (allow a re-run).

        Args:
            tx: resolve inside the caller's transaction (so a domain update commits with it).
        Returns:
            True if the key was in doubt and is now resolved; False if it is unknown or not in doubt.
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
            return False
        happened = outcome == "done"
        tx.run("effect_finish", key=key, from_state="in_doubt", state="done" if happened else "failed",
               result=Json(result if happened else None),
               detail=f"resolved by operator: it had {'' if happened else 'not '}happened", now=now,
               job_id=row["job_id"], attempt=row["attempt"])
        audit.record(tx, now=now, kind="effect.reconciled", subject=f"effect:{key}", source=self.source,
                     detail={"outcome": outcome, "by": "operator"})
        return True
