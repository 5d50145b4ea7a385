"""Schedules for people: definitions, ledger state, next fire times (local and UTC, DST changes marked),
the occurrence ledger as a timeline, and what a backfill would enqueue (read only)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from . import ledger
from .app import App, ScheduleDef
from .errors import OncebeatError
from .schedules import Schedule
from .store import Store
from .timebase import require_aware

__all__ = ["BACKFILL_PREVIEW_LIMIT", "backfill_preview", "describe_schedules", "occurrence_timeline", "upcoming_fires"]

BACKFILL_PREVIEW_LIMIT = 500  # instants listed by a preview; a longer range is refused with this number


def _offset_text(t: datetime) -> str:
    offset = t.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def upcoming_fires(sched: Schedule, now: datetime, count: int) -> list[dict[str, Any]]:
    """The next ``count`` fires after ``now``: ``{"local", "utc", "offset", "dst"}``.

    ``dst`` is None, or a sentence when the zone's UTC offset changes between the previous fire (or
    ``now``) and this one: the fire happens on the other side of a DST transition.
    """
    out = []
    t = require_aware(now, "now")
    previous_offset = _offset_text(sched.local(t))
    for _ in range(count):
        t = sched.next_after(t)
        local = sched.local(t)
        offset = _offset_text(local)
        dst = None
        if offset != previous_offset and not sched.is_interval:
            dst = f"UTC offset changes {previous_offset} → {offset} ({local.tzname()}) before this fire"
        out.append({"local": local.isoformat(), "utc": t.astimezone(UTC).isoformat(), "offset": offset, "dst": dst})
        previous_offset = offset
    return out


def describe_schedules(app: App, store: Store, *, now: datetime, count: int = 3, keys: list[str] | None = None,
                       after: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """One dict per schedule (from the code/config and the database): key, expression, tz, task, state,
    ``origin`` ("code", or "runtime" for a run-time edit, which is what fires until a deploy changes the
    code's definition), DST, catch-up and overlap options, last fire, and the next ``count`` fire instants
    (see :func:`upcoming_fires`; none for a paused or retired schedule).

    Args:
        keys: only these schedules; ``after``/``limit``: a page of keys in key order (keyset). With either,
            each last fire is read from the ledger's index per key instead of one scan of the whole ledger.
    """
    rows = {r["key"]: r for r in ledger.list_schedules(store)}
    selected = sorted(set(rows) | set(app.schedules))
    if keys is not None:
        selected = [k for k in selected if k in set(keys)]
    if after is not None:
        selected = [k for k in selected if k > after]
    if limit is not None:
        selected = selected[:limit]
    if keys is None and after is None and limit is None:
        last = {r["schedule_key"]: r["last_fire_at"] for r in store.read("last_fires")}
    else:
        last = {k: ledger.last_fire_at(store, k) for k in selected}
    manual = {r["schedule_key"]: r["last_run_at"] for r in store.read("last_manual_runs")}
    out = []
    for key in selected:
        d = app.schedules.get(key)
        row = rows.get(key)
        state = row["state"] if row else "not synced yet"
        if row is not None and (d is None or row["origin"] == "runtime"):
            d = ScheduleDef.from_row(row)  # a run-time edit is what fires, not the code's definition
        assert d is not None
        sched = d.schedule()
        # a paused or retired schedule fires nothing: listing its instants would promise runs that never come
        upcoming = upcoming_fires(sched, now, count) if state not in ("retired", "paused") else []
        lf = last.get(key)
        target = d.args.get("target") if d.task == "oncebeat.push" else None  # oncebeat.targets.PUSH_TASK
        out.append({"key": key, "expression": d.expression, "tz": d.tz, "task": d.task, "target": target,
                    "state": state,
                    "queue": d.queue, "catchup": d.catchup, "catchup_window": d.catchup_window,
                    "dst_gap": d.dst_gap, "dst_fold": d.dst_fold, "overlap": d.overlap, "describe": sched.describe(),
                    "version": row["version"] if row else None, "active_since": row["active_since"] if row else None,
                    "in_code": key in app.schedules, "origin": row["origin"] if row else "code",
                    "last_fire_utc": lf.isoformat() if lf else None,
                    "last_fire_local": sched.local(lf).isoformat() if lf else None,
                    "last_manual_local": sched.local(manual[key]).isoformat() if manual.get(key) else None,
                    "next": upcoming})
    return out


def occurrence_timeline(store: Store, key: str, *, before: datetime | None = None,
                        limit: int = 50) -> list[dict[str, Any]]:
    """The ledger of schedule ``key``, newest fire first: each occurrence with its outcome, provenance
    (``source_kind/host/pid/name/version``) and its job's state (``job_state``, None without a job), and the
    unfinished run of the occurrence it serves (``busy_job_id``, ``busy_job_state``; None when none is: only then
    may it be re-run).

    Keyset pagination: pass the last row's ``fire_at`` as ``before`` for the next page.
    """
    return store.read("occurrence_timeline", schedule_key=key,
                      before=require_aware(before, "before") if before else None, limit=limit)


def backfill_preview(store: Store, key: str, start: datetime, end: datetime, *,
                     now: datetime) -> list[dict[str, Any]]:
    """What ``backfill KEY start end`` would do, without writing: each instant in ``(start, end]`` with
    ``{"utc", "local", "existing"}``, where ``existing`` is the ledger row already there (outcome, source)
    or None (it would be enqueued ``backfilled``).

    Raises:
        OncebeatError: unknown or retired schedule, end before start or in the future, or more than
            :data:`BACKFILL_PREVIEW_LIMIT` instants (narrow the range).
    """
    start, end = require_aware(start, "start"), require_aware(end, "end")
    if end < start:
        raise OncebeatError("backfill: the end of the range is before its start")
    if end > now:
        raise OncebeatError("backfill: the end of the range is in the future; backfill only covers past occurrences")
    row = ledger.get_schedule(store, key)
    if row is None:
        raise OncebeatError(f"no schedule {key!r} in the database; start the clock once to sync it")
    if row["state"] == "retired":
        raise OncebeatError(f"schedule {key!r} is retired; it never fires")
    sched = ScheduleDef.from_row(row).schedule()
    out: list[dict[str, Any]] = []
    for instant in sched.between(start - timedelta(microseconds=1), end):
        if len(out) >= BACKFILL_PREVIEW_LIMIT:
            raise OncebeatError(f"backfill: more than {BACKFILL_PREVIEW_LIMIT} occurrences in that range; "
                                "narrow it and backfill in parts")
        out.append({"utc": instant, "local": sched.local(instant),
                    "existing": ledger.occurrence_at(store, key, instant)})
    return out
