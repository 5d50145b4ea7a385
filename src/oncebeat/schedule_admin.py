"""Run-time schedule management: the admin verbs the CLI and the dashboard call.

A schedule is defined in code or config (:class:`oncebeat.App`) and synced to the
``schedules`` table by the clock. An operator can change it at run time without a
deploy; the change is a new definition version in the database that every clock
picks up at its next re-read of the schedules table (``resync_interval``, 30 s by
default, and at the very next fire), without a restart.

Which wins when code and a run-time edit disagree: **the database overrides the
code until the next deploy changes the code's definition.** A run-time edit records
the code definition it overrides (``code_hash``); a clock syncing the same code keeps
the edit, a clock bringing a *changed* code definition replaces it (the deploy is the
newer decision). ``oncebeat schedules`` shows ``origin`` (``code`` or ``runtime``).
A retired schedule never fires again, whatever the code says.

Every edit obeys the clock's rules (G1): it counts from the moment of the edit and
never from before the newest recorded instant, and a schedule that fires at most
once per local day, week or month never serves one business period twice.

Example::

    set_schedule(store, "reminders", expression="30 9 * * *", tz="Europe/Paris")
    retire_schedule(store, "old-digest")
    rerun_occurrence(store, 42)           # a manual run for occurrence 42's business date
    pause_schedule(store, app, "reminders"); resume_schedule(store, app, "reminders")
    trigger_schedule(store, app, "reminders")   # a manual run now, outside the schedule
    backfill_schedule(store, app, "reminders", start, end)
    describe_schedule(store, app, "reminders", now=now)

The verbs that need the code's definitions (``app``) sync them first when no clock has run yet, as a clock
would, so they work on a fresh database.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from . import audit, ledger, queue
from .app import App, ScheduleDef
from .clock import TZDATA_VERSION, ClockProcess, Fire, enqueue_run, overlap_keys
from .errors import OncebeatError, RunUnfinished, UniqueConflict
from .provenance import Source, current_source
from .queue import Queue
from .store import Store, Tx
from .timebase import Clock, SystemClock

__all__ = ["EDITABLE", "ScheduleEdit", "rerun_occurrence", "retire_schedule", "revert_schedule", "schedule_known",
           "set_schedule",
           "trigger_schedule",
           "backfill_schedule", "pause_schedule", "resume_schedule", "describe_schedule"]

EDITABLE = ("expression", "tz", "dst_gap", "dst_fold", "catchup", "catchup_window", "overlap")


class ScheduleEdit(dict[str, Any]):
    """What :func:`set_schedule` did: ``key``, ``changed`` (bool), ``version``, ``old`` and ``new`` definitions."""


def _schedule_row(tx: Tx, key: str) -> dict[str, Any]:
    row = ledger.get_schedule(tx, key)
    if row is None:
        known = ", ".join(r["key"] for r in ledger.list_schedules(tx)) or "none"
        raise OncebeatError(f"no schedule {key!r} in the database (known: {known}); schedules come from code or "
                            "config and are synced when a clock or `oncebeat tick` starts")
    return row


def _definition_text(d: ScheduleDef) -> dict[str, Any]:
    return {name: getattr(d, name) for name in EDITABLE}


def set_schedule(store: Store, key: str, *, expression: str | None = None, tz: str | None = None,
                 dst_gap: str | None = None, dst_fold: str | None = None, catchup: str | None = None,
                 catchup_window: float | None = None, overlap: str | None = None, source: Source | None = None,
                 clock: Clock | None = None) -> ScheduleEdit:
    """Change schedule ``key`` at run time: a new definition version every clock picks up without a restart.

    Only the given fields change (``catchup_window`` in seconds; ``overlap`` one of
    :data:`oncebeat.app.OVERLAP_POLICIES`, applying to runs enqueued from now on); task, arguments and queue stay
    those of the code. The edit counts from now (never from before the newest recorded instant)
    and overrides the code's definition until a deploy changes that definition.

    Returns:
        A :class:`ScheduleEdit`; ``changed`` is False when the definition was already that.

    Raises:
        OncebeatError: unknown or retired schedule.
        ConfigError / ScheduleError: an invalid expression, zone, DST option, catch-up or overlap policy
            (the message names the field).
    """
    source = source or current_source("api")
    now = (clock or SystemClock()).now()
    changes: dict[str, Any] = {k: v for k, v in (("expression", expression), ("tz", tz), ("dst_gap", dst_gap),
                                 ("dst_fold", dst_fold), ("catchup", catchup),
                                 ("catchup_window", catchup_window), ("overlap", overlap)) if v is not None}
    if not changes:
        raise OncebeatError(f"schedules set {key}: nothing to change; give --cron/--every, --tz, --dst-gap, "
                            "--dst-fold, --catchup, --catchup-window or --overlap")
    with store.transaction() as tx:
        row = _schedule_row(tx, key)
        if row["state"] == "retired":
            raise OncebeatError(f"schedule {key!r} is retired; it never fires again (define it under a new key)")
        old = ScheduleDef.from_row(row)
        new = replace(old, **changes)  # validates: raises ConfigError / ScheduleError naming the field
        if new.definition_hash() == old.definition_hash():
            return ScheduleEdit(key=key, changed=False, version=row["version"], old=_definition_text(old),
                                new=_definition_text(new))
        code_hash = row["code_hash"] if row["origin"] == "runtime" else row["definition_hash"]
        updated = tx.one("override_schedule", **_version_params(tx, key, new, now), code_hash=code_hash)
        return _versioned(tx, updated, "schedule.changed", "runtime", key, old, new, now=now, source=source)


def _version_params(tx: Tx, key: str, new: ScheduleDef, now: datetime) -> dict[str, Any]:
    """The parameters of a new version of ``key`` defined as ``new``: counted from now and never from before the
    newest recorded instant (G1)."""
    last = ledger.last_fire_at(tx, key)
    return {"key": key, "expression": new.expression, "tz": new.tz, "dst_gap": new.dst_gap, "dst_fold": new.dst_fold,
            "catchup": new.catchup, "catchup_window": new.catchup_window, "overlap": new.overlap,
            "definition_hash": new.definition_hash(), "active_since": max(x for x in (now, last) if x is not None),
            "now": now}


def _versioned(tx: Tx, updated: dict[str, Any] | None, kind: str, origin: str, key: str, old: ScheduleDef,
               new: ScheduleDef, *, now: datetime, source: Source) -> ScheduleEdit:
    """Audit the new version ``updated`` (``kind``) and answer it as a :class:`ScheduleEdit`."""
    assert updated is not None
    audit.record(tx, now=now, kind=kind, subject=f"schedule:{key}", source=source,
                 detail={"old": _definition_text(old), "new": _definition_text(new), "origin": origin,
                         "version": updated["version"]})
    return ScheduleEdit(key=key, changed=True, version=updated["version"], old=_definition_text(old),
                        new=_definition_text(new))


def revert_schedule(store: Store, app: App, key: str, *, source: Source | None = None,
                    clock: Clock | None = None) -> ScheduleEdit:
    """Undo the run-time edits of ``key``: the code's definition (``app``) again, as a new version every clock picks
    up without a restart, counted from now (never from before the newest recorded instant, G1), origin ``code``.

    Audited ``schedule.reverted`` with the run-time definition it replaces.

    Returns:
        A :class:`ScheduleEdit`; ``changed`` is False when the schedule had no run-time edit (already the code's).
    Raises:
        OncebeatError: unknown or retired schedule, or one the code does not define (nothing to revert to).
    """
    source = source or current_source("api")
    now = (clock or SystemClock()).now()
    code = app.schedules.get(key)
    with store.transaction() as tx:
        row = _schedule_row(tx, key)
        if row["state"] == "retired":
            raise OncebeatError(f"schedule {key!r} is retired; it never fires again (define it under a new key)")
        current = ScheduleDef.from_row(row)
        if code is None:
            raise OncebeatError(f"schedule {key!r} is not defined in the code this command loaded (--app/--config): "
                                "there is no code definition to revert to")
        if row["origin"] != "runtime":
            return ScheduleEdit(key=key, changed=False, version=row["version"], old=_definition_text(current),
                                new=_definition_text(current))
        updated = tx.one("revert_schedule", **_version_params(tx, key, code, now))
        return _versioned(tx, updated, "schedule.reverted", "code", key, current, code, now=now, source=source)


def retire_schedule(store: Store, key: str, *, source: Source | None = None, clock: Clock | None = None) -> bool:
    """Retire ``key``: it never fires again, on any clock, whatever the code defines.

    Returns:
        False when it was already retired.

    Raises:
        OncebeatError: unknown schedule.
    """
    source = source or current_source("api")
    now = (clock or SystemClock()).now()
    with store.transaction() as tx:
        row = _schedule_row(tx, key)
        if not ledger.set_schedule_state(tx, key, "retired", now):
            return False
        audit.record(tx, now=now, kind="schedule.retired", subject=f"schedule:{key}", source=source,
                     detail={"expression": row["expression"], "tz": row["tz"], "by": "operator"})
    return True


def rerun_occurrence(store: Store, occurrence_id: int, *, source: Source | None = None,
                     clock: Clock | None = None, app: App | None = None) -> Fire:
    """Run occurrence ``occurrence_id`` again: a ``manual`` run linked to it (``rerun_of``).

    The new run is recorded at now with full precision (so it never takes the identity of a
    scheduled instant, past or future) and carries the original's **business date**, so the task
    works on the same day. Its job serves the original occurrence (the first of a chain of re-runs): it is
    refused while a run of that occurrence is unfinished — its own job, an earlier re-run, a retried one —
    by the database (at most one unfinished run per occurrence, the partial unique index
    ``jobs_one_run_per_occurrence``), however many operators re-run it at once; and
    when the schedule's overlap policy turns the run away (``skip`` while another run is unfinished,
    ``buffer_one`` while one also waits); under ``buffer_one`` it may be held behind the running one.
    With ``app``, the task's defaults (priority, attempts) apply to the new job.

    Returns:
        The manual :class:`~oncebeat.clock.Fire`, with its job id.

    Raises:
        RunUnfinished: a run of the occurrence is unfinished (the message names its job).
        OncebeatError: unknown occurrence, a retired schedule, or the overlap policy refusing it.
    """
    source = source or current_source("api")
    clk = clock or SystemClock()
    now = clk.now()
    served = [occurrence_id]
    try:
        return _rerun(store, occurrence_id, source, clk, app, now, served)
    except UniqueConflict as exc:  # another re-run (or retry) of the occurrence committed first
        if exc.constraint != queue.ONE_RUN_INDEX:
            raise
        holder = queue.unfinished_run(store, served[0]) or {}
        raise RunUnfinished(served[0], holder.get("id"), holder.get("state"), action="re-run it") from exc


def _rerun(store: Store, occurrence_id: int, source: Source, clk: Clock, app: App | None, now: datetime,
           served_out: list[int]) -> Fire:
    """:func:`rerun_occurrence`'s transaction; ``served_out[0]`` is set to the occurrence the run serves."""
    with store.transaction() as tx:
        occ = ledger.get_occurrence(tx, occurrence_id)
        if occ is None:
            raise OncebeatError(f"no occurrence {occurrence_id}; `oncebeat schedules` and the dashboard list them")
        row = _schedule_row(tx, occ["schedule_key"])
        if row["state"] == "retired":
            raise OncebeatError(f"schedule {row['key']!r} is retired; its occurrences are not run again")
        _refuse_if_running(tx, occurrence_id, served_out)
        definition = ScheduleDef.from_row(row)
        local = definition.schedule().local(now)
        reason = f"rerun of occurrence {occurrence_id} ({occ['outcome']}, {occ['local_fire_at']})"
        inserted = tx.one("insert_rerun_occurrence", schedule_key=row["key"], fire_at=now,
                          local_fire_at=local.isoformat(), tz=definition.tz, business_date=occ["business_date"],
                          tzdata_version=TZDATA_VERSION, rerun_of=occurrence_id, reason=reason, now=now,
                          **source.params())
        if inserted is None:  # another make-up run recorded at this very microsecond
            _refuse_if_running(tx, occurrence_id, served_out)
            raise OncebeatError(f"occurrence {occurrence_id} was just re-run by another process; see the ledger")
        new_id = int(inserted["id"])
        job_id, turned_away = enqueue_run(tx, Queue(store, clock=clk, source=source, app=app), definition, new_id,
                                          source, None)
        if job_id is None:  # the overlap policy: refused, and the transaction (with its ledger row) rolls back
            _refuse_if_running(tx, occurrence_id, served_out)  # a concurrent re-run of it holds the overlap key
            holder = tx.one("overlap_holder", key=overlap_keys(row["key"])[0]) or {}
            raise OncebeatError(f"occurrence {occurrence_id} not re-run: schedule {row['key']!r} has overlap "
                                f"{definition.overlap} and {turned_away} (job {holder.get('id')} "
                                f"{holder.get('state')}); re-run it when that run has finished")
        ledger.set_occurrence_job(tx, new_id, job_id)  # the database refuses a second unfinished run here
        audit.record(tx, now=now, kind="occurrence.rerun", subject=f"schedule:{row['key']}", source=source,
                     detail={"occurrence_id": new_id, "rerun_of": occurrence_id, "job_id": job_id,
                             "business_date": str(occ["business_date"])})
    return Fire(schedule_key=row["key"], fire_at=now, local=local, outcome="manual", inserted=True,
                occurrence_id=new_id, job_id=job_id, reason=reason)


def _refuse_if_running(tx: Tx, occurrence_id: int, served_out: list[int]) -> None:
    """Raise :class:`RunUnfinished` if the occurrence ``occurrence_id`` serves has an unfinished run (read in
    ``tx``: on PostgreSQL each statement sees what committed before it); ``served_out[0]`` becomes that
    occurrence's id."""
    busy = tx.one("unfinished_run_of_occurrence", occurrence_id=occurrence_id)
    assert busy is not None  # one row, whether or not a run is unfinished
    served_out[0] = int(busy["served"])
    if busy["id"] is not None:
        raise RunUnfinished(served_out[0], int(busy["id"]), str(busy["state"]), action="re-run it")


def _clock(store: Store, app: App, source: Source | None, clock: Clock | None) -> ClockProcess:
    """A clock object for one admin action (it fires nothing by itself; its rules are the clock's own)."""
    return ClockProcess(app, store, clock=clock or SystemClock(), source=source or current_source("cli"))


def schedule_known(store: Store, app: App, key: str, *, clock: Clock | None = None) -> None:
    """Check that ``key`` can be triggered, paused or resumed, syncing the code's definitions first when no clock
    has yet (as a clock would, in transactions of its own): call it before a verb given a caller's ``tx``.

    Raises:
        OncebeatError: ``key`` is unknown or retired.
    """
    _clock(store, app, None, clock).known(key)


def trigger_schedule(store: Store, app: App, key: str, *, source: Source | None = None,
                     clock: Clock | None = None, tx: Tx | None = None) -> Fire:
    """Fire ``key`` now, outside its schedule: an occurrence recorded ``manual`` with ``source``'s provenance.

    The overlap policy applies (a ``skip`` schedule whose run is unfinished records the manual occurrence
    without a job). ``tx``: fire in the caller's transaction (after :func:`schedule_known`).
    Raises :class:`OncebeatError` when ``key`` is unknown or retired.
    """
    source = source or current_source("cli")
    return _clock(store, app, source, clock).trigger(key, kind=source.kind, tx=tx)


def backfill_schedule(store: Store, app: App, key: str, start: datetime, end: datetime, *,
                      source: Source | None = None, clock: Clock | None = None) -> list[Fire]:
    """Enqueue every occurrence of ``key`` with ``start <= instant <= end`` (aware, in the past) that the ledger
    does not hold yet, recorded ``backfilled``; instants already there are returned with ``inserted=False``.

    Raises:
        OncebeatError: ``key`` unknown or retired, ``end`` before ``start`` or in the future.
    """
    return _clock(store, app, source, clock).backfill(key, start, end)


def pause_schedule(store: Store, app: App, key: str, *, source: Source | None = None,
                   clock: Clock | None = None, tx: Tx | None = None) -> bool:
    """Pause ``key``: its occurrences are recorded ``paused`` and enqueue nothing, and its runs queued and not yet
    started are held (no worker claims them) until :func:`resume_schedule` (one audit event per pause, counting
    them as ``held_runs``). A run already running is not stopped (:mod:`oncebeat.pauses`).

    ``tx``: in the caller's transaction (after :func:`schedule_known`).
    Returns False when it was already paused. Raises :class:`OncebeatError` for an unknown or retired key.
    """
    return _clock(store, app, source, clock).set_state(key, "paused", tx=tx)


def resume_schedule(store: Store, app: App, key: str, *, source: Source | None = None,
                    clock: Clock | None = None, tx: Tx | None = None) -> bool:
    """Resume ``key`` from now on (no burst of the occurrences paused). False when it was not paused.

    The runs its pause held become claimable at once, each to run once, however old its occurrence
    (``released_runs`` in the audit event).

    ``tx``: in the caller's transaction (after :func:`schedule_known`).
    Raises :class:`OncebeatError` for an unknown or retired key.
    """
    return _clock(store, app, source, clock).set_state(key, "active", tx=tx)


def describe_schedule(store: Store, app: App, key: str, *, now: datetime, count: int = 5,
                      history: int = 10) -> dict[str, Any]:
    """One schedule as :func:`oncebeat.schedules_report.describe_schedules` gives it (definition, origin, state,
    next ``count`` fires in local time and UTC), plus ``occurrences``: its newest ``history`` ledger rows.

    Raises:
        OncebeatError: no schedule ``key`` in the code or the database.
    """
    from .schedules_report import describe_schedules, occurrence_timeline

    rows = describe_schedules(app, store, now=now, count=count, keys=[key])
    if not rows:
        known = ", ".join(r["key"] for r in describe_schedules(app, store, now=now, count=0)) or "none"
        raise OncebeatError(f"no schedule {key!r} (known: {known})")
    return {**rows[0], "occurrences": occurrence_timeline(store, key, limit=history)}
