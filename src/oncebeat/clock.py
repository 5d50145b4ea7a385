"""The clock process: turns schedules into occurrences and jobs, exactly once each (G1, G2).

On each tick, for every schedule whose next fire instant has come, one
transaction:

1. reads the schedule's cursor from the **occurrence ledger** — the newest
   recorded (non-manual) fire instant **at or before now**, or the instant the
   schedule was added / changed / resumed if later — never from process
   memory. So the due instants are exactly those missing from the ledger in
   the catch-up window up to now: a wall clock stepped back never repeats an
   instant (it is in the ledger), and instants recorded while a clock ran fast
   do not hide the ones still missing before them;
2. lists the fire instants in ``(cursor, now]``;
3. decides each one. Only the **newest** due instant can be on time (within
   ``misfire_grace`` seconds of now; being the newest, it is also within one
   period): it is enqueued. Every older one is a catch-up decision, whatever
   the schedule's period: ``none`` records them ``missed``, ``latest``
   enqueues the newest late one only when nothing is on time and records the
   rest ``coalesced``, ``all`` enqueues each oldest first — only inside
   ``catchup_window``; instants older than the window are counted as missed.
   So a restart, a freeze or a database blip costs at most one catch-up run per
   schedule (policies ``none``/``latest``). A paused schedule records ``paused``;
4. applies the **period rule**: a schedule that fires at most once per local
   day, week or month (:meth:`Schedule.business_period`) never serves one
   business period twice, across definition changes (zone, expression):
   an instant whose period already has a scheduled run is recorded
   ``coalesced`` with reason "period already served";
5. inserts each occurrence with ``INSERT … ON CONFLICT DO NOTHING`` and, only
   when the row was inserted, enqueues its job in the same transaction;
6. applies the schedule's **overlap policy** to that job (:func:`fire_occurrence`): under ``skip`` an
   occurrence whose previous run is unfinished gets no job (``coalesced``, "overlap: previous run still
   running"), under ``buffer_one`` one such run is held until the previous finishes. Manual, backfilled and
   re-run runs count alike. The database enforces it (a unique index on the run's overlap key), so it holds
   with any number of clocks and workers; each tick first releases held runs whose predecessor finished.

So any number of clocks, restarts and catch-ups give at most one job per
occurrence: a second clock's insert conflicts and enqueues nothing (the
rejected duplicate is recorded in the audit trail). A clock never fires
because it started: a new schedule's first instant is strictly after the
moment it was first synced.

Definitions are synced at start (added / changed / retired). A changed
schedule counts from the change, and never from before its newest recorded
instant (so a sub-daily schedule never fires an instant at or before its last
fire). A retired schedule never fires. A clock whose definition set is older than the newest
one another clock synced (an old version still running) changes nothing and
fires only schedules whose stored definition equals its own.

Every fire is logged with local time, zone and UTC.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from importlib import metadata
from typing import Any

from . import audit, ledger, processes, telemetry
from .app import App, ScheduleDef
from .cursors import Cursors
from .dbtime import describe_time_source
from .errors import ConfigError, OncebeatError, StoreError
from .pauses import held_jobs
from .provenance import Source, current_source
from .queue import HELD_UNTIL, Queue  # HELD_UNTIL: run_at of a run held by overlap buffer_one until released
from .schedules import Schedule, period_bounds
from .store import Json, Store, Tx
from .store.base import instant_text
from .timebase import UTC, Clock, SystemClock, require_aware

__all__ = ["HELD_UNTIL", "OVERLAP_FULL", "OVERLAP_RUNNING", "PERIOD_SERVED", "ClockProcess", "Fire", "SyncReport",
           "enqueue_run", "fire_occurrence", "overlap_keys", "release_buffered", "schedule_cursor"]

log = logging.getLogger("oncebeat.clock")

HEARTBEAT_SECONDS = 5.0  # how often a ticking clock refreshes its row in the process registry
MAX_LEDGER_ROWS_PER_TICK = 1000  # older late instants are summarised in one audit event
PASSED_OVER_ROWS = 100  # instants before the catch-up window recorded one by one (`missed`), then one summary row
FIRE_BATCH = 200  # schedules recorded per transaction when many are due at once
FIRE_SET_BATCH = 2000  # on-time schedules recorded per transaction by the set-based fire (a few statements each)
FIRE_SET_THREADS = 2  # PostgreSQL: batches of one burst recorded at once, each in its own transaction and connection
PERIOD_SERVED = "period already served"
OVERLAP_RUNNING = "overlap: previous run still running"
OVERLAP_FULL = "overlap: previous run still running and one run already waiting"
PREPARE_HORIZON = 120.0  # seconds ahead for which a waiting clock prepares the next instants (prepare_ahead)
PREPARE_EVERY = 10.0  # seconds between complete passes of prepare_ahead
TICK_MAX_EARLY = 900.0  # seconds a `tick --at` instant may lie ahead of the clock (an early delivery)
STARTUP_RETRY_MAX = 5.0  # seconds between start-up attempts at most (1 s, doubling): a lock or blip at start-up
_REASONS = {"paused": "schedule paused", "missed": "catch-up policy none",
            "coalesced": "catch-up policy latest: a later occurrence runs instead"}

try:
    TZDATA_VERSION: str | None = metadata.version("tzdata")
except metadata.PackageNotFoundError:  # system zone data only
    TZDATA_VERSION = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Fire:
    """One decision about one occurrence. ``inserted`` is False when another process recorded it first."""

    schedule_key: str
    fire_at: datetime
    local: datetime
    outcome: str
    inserted: bool
    occurrence_id: int | None = None
    job_id: int | None = None
    reason: str | None = None
    existing: str | None = None  # when not inserted and known: what the ledger already holds at that instant

    def describe(self) -> str:
        return (f"{self.schedule_key} {self.local.strftime('%Y-%m-%d %H:%M:%S %Z')} ({self.local.tzinfo}) "
                f"= {self.fire_at.strftime('%Y-%m-%d %H:%M:%S')} UTC: {self.outcome}"
                + (f" ({self.reason})" if self.reason else "")
                + (f", job {self.job_id}" if self.job_id else "")
                + ("" if self.inserted else f" ({self.existing or 'already recorded by another process'})"))


@dataclass(kw_only=True, slots=True)
class SyncReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    stale: bool = False
    ignored_retired: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        if self.stale:
            out.append("this clock's schedule definitions are older than the newest synced set: it changes nothing "
                       "and fires only schedules whose stored definition equals its own (old version still running?)")
        for label, keys in (("added", self.added), ("changed", self.changed), ("retired", self.retired),
                            ("retired in the database, not fired", self.ignored_retired)):
            if keys:
                out.append(f"schedules {label}: {', '.join(keys)}")
        return out


def schedule_cursor(last_fire: datetime | None, active_since: datetime | None, now: datetime) -> datetime:
    """The instant after which a schedule's instants are due: its newest recorded instant at or before ``now``,
    or the moment it became active if later (a new, resumed or edited schedule never fires an instant before it).

    ``active_since`` may lie after ``now``: an edit takes effect after the newest recorded instant, which a fast
    clock may have recorded early. One set by a clock that ran fast when it synced, and was stepped back since, is
    brought back to ``now`` (not below the newest recorded instant) by the clock's re-read (``clamp_active_since``),
    so the instants after ``now`` are due as any other instead of being skipped until the fast time comes round.
    """
    found = [x for x in (last_fire, active_since) if x is not None]
    return max(found) if found else now


def overlap_keys(key: str) -> tuple[str, str]:
    """The unique keys of schedule ``key``'s runs under an overlap policy: (the current run's, the held run's)."""
    return f"overlap:{key}", f"overlap-held:{key}"


def enqueue_run(tx: Tx, queue: Queue, definition: ScheduleDef, occurrence_id: int, source: Source,
                 options: dict[str, int] | None) -> tuple[int | None, str | None]:
    """Enqueue the run of one occurrence under the schedule's overlap policy: (job id, None) or (None, reason).

    Under ``skip`` and ``buffer_one`` the run holds the unique key ``overlap:<key>`` (the partial unique index
    ``jobs_unique_key`` admits one unfinished job per key), so the database itself turns away a second run
    while one is unfinished — whichever clock, ``tick``, trigger, backfill or re-run enqueues it, concurrently
    or not. ``buffer_one`` then holds one waiting run under ``overlap-held:<key>`` (scheduled at
    :data:`HELD_UNTIL`, released by :func:`release_buffered` once the running one has finished).
    """
    options = options or {}

    def put(unique_key: str | None, run_at: datetime | None = None) -> int | None:
        return queue.enqueue(definition.task, definition.args, tx=tx, queue=definition.queue,
                             occurrence_id=occurrence_id, source=source, priority=options.get("priority"),
                             max_attempts=options.get("max_attempts"), unique_key=unique_key, run_at=run_at)

    if definition.overlap == "allow":
        return put(None), None
    run_key, held_key = overlap_keys(definition.key)
    # Runs enqueued while the schedule was `allow` hold no key: after a switch they are unfinished runs all the same.
    # (Once none is left the index alone decides; no new keyless run is made under skip/buffer_one.)
    keyless = tx.one("unfinished_run_without_overlap_key", schedule_key=definition.key, run_key=run_key,
                     held_key=held_key)
    job_id = put(run_key) if keyless is None else None
    if job_id is not None:
        return job_id, None
    if definition.overlap == "skip":
        return None, OVERLAP_RUNNING
    job_id = put(held_key, HELD_UNTIL)
    return (job_id, None) if job_id is not None else (None, OVERLAP_FULL)


def release_buffered(store: Store, key: str, *, now: datetime) -> int | None:
    """Start schedule ``key``'s held run (overlap ``buffer_one``) if its previous run has finished.

    Returns the released job's id, or None (nothing held, or the previous run still unfinished).
    Called by every clock tick and ``tick`` pass for its ``buffer_one`` schedules; safe to run
    concurrently (the row lock and the unique index let one release win; a race lost is a no-op).
    """
    run_key, held_key = overlap_keys(key)
    try:
        with store.transaction() as tx:
            row = tx.one("release_buffered_job", run_key=run_key, held_key=held_key, schedule_key=key, now=now)
    except StoreError as exc:  # a run enqueued at this very moment took the key first: the held one waits on
        if "unique" not in str(exc).lower():
            raise
        return None
    return int(row["id"]) if row else None


def fire_occurrence(tx: Tx, *, queue: Queue, definition: ScheduleDef, schedule: Schedule, instant: datetime,
                    outcome: str, source: Source, now: datetime, process_id: int | None = None,
                    task_options: dict[str, int] | None = None, reason: str | None = None) -> Fire:
    """Record one occurrence (and enqueue its job when ``outcome`` enqueues) inside ``tx``.

    ``outcome`` is one of enqueued, missed, coalesced, paused, manual, backfilled;
    enqueued/manual/backfilled get a job, under the schedule's **overlap policy**: ``allow`` always;
    ``skip`` not while a previous run of the schedule (scheduled, manual, backfilled or re-run) is
    unfinished — the occurrence is recorded ``coalesced`` (a manual one stays ``manual``, without a job)
    with reason :data:`OVERLAP_RUNNING`; ``buffer_one`` enqueues it held until the running one finishes,
    and records a further one ``coalesced`` with :data:`OVERLAP_FULL`. The policy is enforced here, in the
    same transaction as the ledger row, by the database's unique index on the run's overlap key (see
    :func:`enqueue_run`), so it holds across any number of clocks, ``tick`` passes and operators; the
    claim path needs no check (a held run is not due). ``reason`` (kept on the row and in the audit
    event) says why an occurrence did not run, e.g. :data:`PERIOD_SERVED`. The unique (schedule_key, fire_at)
    constraint makes a second call for the same instant a no-op (recorded as
    a rejected duplicate in the audit trail).
    """
    local = schedule.local(instant)
    row = tx.one("insert_occurrence", schedule_key=definition.key, fire_at=instant,
                 local_fire_at=local.isoformat(), tz=schedule.tz, business_date=local.date(),
                 tzdata_version=TZDATA_VERSION, outcome=outcome, reason=reason, now=now, **source.params())
    if row is None:
        telemetry.emit("occurrence.duplicate", {"schedule": definition.key})
        audit.record(tx, now=now, kind="occurrence.duplicate_rejected", subject=f"schedule:{definition.key}",
                     source=source, process_id=process_id,
                     detail={"fire_at": instant.isoformat(), "local": local.isoformat(), "attempted": outcome})
        return Fire(schedule_key=definition.key, fire_at=instant, local=local, outcome=outcome, inserted=False,
                    reason=reason)
    occ_id = int(row["id"])
    telemetry.emit("occurrence.recorded", {"schedule": definition.key, "outcome": outcome,
                                           "lag_seconds": (now - instant).total_seconds(), "occurrence_id": occ_id,
                                           "fire_at": instant, "recorded_at": now})
    job_id = None
    if outcome in ("enqueued", "manual", "backfilled"):
        job_id, turned_away = enqueue_run(tx, queue, definition, occ_id, source, task_options)
        if turned_away is not None:
            # A manual run keeps its outcome (the cursor reads only scheduled instants); a scheduled one is coalesced.
            outcome, reason = ("manual" if outcome == "manual" else "coalesced"), turned_away
            tx.run("set_occurrence_outcome", id=occ_id, outcome=outcome, reason=reason)
            log.info("%s %s not run: %s", definition.key, local.isoformat(), reason,
                     extra={"event": "clock.overlap", "schedule": definition.key})
        else:
            ledger.set_occurrence_job(tx, occ_id, job_id)
    if outcome not in ("enqueued", "paused"):  # a pause is audited once, by schedule.paused, not per slot
        audit.record(tx, now=now, kind=f"occurrence.{outcome}", subject=f"schedule:{definition.key}",
                     source=source, process_id=process_id,
                     detail={"occurrence_id": occ_id, "fire_at": instant.isoformat(), "local": local.isoformat(),
                             "job_id": job_id, "reason": reason})
    return Fire(schedule_key=definition.key, fire_at=instant, local=local, outcome=outcome, inserted=True,
                occurrence_id=occ_id, job_id=job_id, reason=reason)


def _existing_text(tx: Tx, key: str, instant: datetime) -> str | None:
    """What the ledger holds at ``instant`` of ``key``, in words (outcome, by whom, its job's state)."""
    row = tx.one("occurrence_at_with_job", schedule_key=key, fire_at=instant)
    if row is None:
        return None
    job = f"job {row['job_id']} {row['job_state']}" if row["job_id"] is not None else "no job"
    reason = f" ({row['reason']})" if row["reason"] else ""
    return (f"already in the ledger: {row['outcome']}{reason} by {row['source_kind']} {row['source_name']} "
            f"(host {row['source_host']}, pid {row['source_pid']}) at "
            f"{row['created_at'].astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')} UTC, occurrence {row['id']}, {job}")


@dataclass(frozen=True, kw_only=True, slots=True)
class _OnTime:
    """A schedule's next instant ``fire_at`` prepared for the set-based fire (computed ahead, off the fire's path).

    ``floor``: the schedule has no instant in (floor, fire_at); ``after``: its next instant after ``fire_at``;
    ``row``: the ``fire_on_time`` row, as JSON text (encoded here, off the fire's path: a burst joins 10,000 of them).
    """

    key: str
    version: int
    definition: ScheduleDef
    sched: Schedule
    fire_at: datetime
    floor: datetime
    after: datetime
    local: datetime
    row: str

    @classmethod
    def prepare(cls, key: str, version: int, definition: ScheduleDef, sched: Schedule, fire_at: datetime,
                floor: datetime) -> _OnTime:
        """Compute ``after``, ``local`` and the row: [key, version, fire_at, local_fire_at, tz, business_date,
        floor, first, last, from_at, to_at] (instants as fixed-width UTC text; period bounds None without one)."""
        local = sched.local(fire_at)
        first = last = from_at = to_at = None
        period = sched.business_period()
        if period is not None:
            p_first, p_last = period_bounds(period, local.date())
            first, last = p_first.isoformat(), p_last.isoformat()
            # as in period_served: fire_at bounds let the (schedule_key, fire_at) index narrow the scan
            from_at = instant_text(datetime(p_first.year, p_first.month, p_first.day, tzinfo=UTC) - timedelta(days=1))
            to_at = instant_text(datetime(p_last.year, p_last.month, p_last.day, tzinfo=UTC) + timedelta(days=2))
        row = json.dumps([key, version, instant_text(fire_at), local.isoformat(), sched.tz, local.date().isoformat(),
                          instant_text(floor), first, last, from_at, to_at], separators=(",", ":"))
        return cls(key=key, version=version, definition=definition, sched=sched, fire_at=fire_at, floor=floor,
                   after=sched.next_after(fire_at), local=local, row=row)


def _set_hash(definitions: Iterable[ScheduleDef]) -> str:
    body = sorted((d.key, d.definition_hash()) for d in definitions)
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()[:24]


class _PassedOver:
    """The instants a catch-up passes over, bounded: the newest ``keep`` of them, the newest one dropped from those
    (where a summary row goes), the first, and how many there were."""

    def __init__(self, keep: int) -> None:
        self.kept: collections.deque[datetime] = collections.deque(maxlen=keep)
        self.first: datetime | None = None
        self.summary_at: datetime | None = None
        self.count = 0

    def add(self, instant: datetime) -> None:
        if self.first is None:
            self.first = instant
        if len(self.kept) == self.kept.maxlen:
            self.summary_at = self.kept[0]
        self.kept.append(instant)
        self.count += 1


def _held_runs(tx: Tx, key: str) -> int:
    """The runs of ``key``'s occurrences waiting unclaimed that its pause holds (or would hold)."""
    return sum(h.n for h in held_jobs(tx, schedule_key=key) if h.kind == "schedule")


class ClockProcess:
    """Fires the schedules of ``app`` (or a list of definitions) into ``store``.

    Args:
        clock: the time source (default the host clock; see :mod:`oncebeat.dbtime` for the
            database's clock). Its ``describe()`` is printed in the start-up report.
        misfire_grace: seconds after a fire instant within which it counts as on time; only the
            newest due instant of a schedule can be on time (so the grace never exceeds one
            period), older ones are catch-up decisions.
        tick_interval: seconds between ticks in :meth:`run`.
        resync_interval: seconds between re-reads of the schedules table (to see
            pauses, retirements and changes made by other processes).
        echo: called with each human-readable line worth printing (start-up decisions, fires).
    """

    def __init__(self, definitions: App | Iterable[ScheduleDef], store: Store, *, clock: Clock | None = None,
                 source: Source | None = None, misfire_grace: float = 60.0, tick_interval: float = 1.0,
                 resync_interval: float = 30.0, echo: Callable[[str], None] | None = None) -> None:
        defs = list(definitions.schedules.values()) if isinstance(definitions, App) else list(definitions)
        keys = [d.key for d in defs]
        if len(set(keys)) != len(keys):
            raise ConfigError("two schedules share a key; schedule keys must be unique")
        self.definitions = {d.key: d for d in defs}
        self.store = store
        self.clock = clock or SystemClock()
        self.source = source or current_source("clock")
        self.misfire_grace = misfire_grace
        self.tick_interval = tick_interval
        self.resync_interval = resync_interval
        self.echo = echo or (lambda line: None)
        self._echoes = echo is not None
        self.queue = Queue(store, clock=self.clock, source=self.source)
        self.task_options: dict[str, dict[str, int]] = (
            {name: {"priority": t.priority, "max_attempts": t.max_attempts}
             for name, t in definitions.tasks.items()} if isinstance(definitions, App) else {})
        self.process_id: int | None = None
        self.stale = False
        self._rows: dict[str, dict[str, Any]] = {}  # key -> schedule row of each schedule this clock fires
        self._seen: dict[str, tuple[int, str]] = {}  # key -> (version, state) of every row at the last read
        self._parsed: dict[str, Schedule] = {}
        self._runtime: dict[str, tuple[int, ScheduleDef]] = {}  # key -> (version, definition) of run-time edits
        self._next = Cursors()  # key -> next fire instant, indexed by time (due / earliest without a scan)
        # key -> an instant L such that the schedule has no instant in (L, _next[key]): lets the set-based fire
        # check, in SQL, that the ledger's cursor agrees with this clock's memory (see _fire_on_time).
        self._floor: dict[str, datetime] = {}
        self._prepared: dict[str, _OnTime] = {}  # key -> its next instant prepared for the set-based fire
        self._buffered: set[str] = set()  # keys of overlap buffer_one schedules (held runs to release)
        self._prepare_pass: datetime | None = None  # when prepare_ahead last finished a pass
        self._last_load: datetime | None = None
        self._last_heartbeat: datetime | None = None
        self._last_now: datetime | None = None
        self.time_source = ""  # filled at start(): where this clock's time comes from
        self.stop_requested = threading.Event()
        self.stop_reason = "stopped"  # why run() ended, for its stop line
        self.fires = 0

    # --- definitions ---------------------------------------------------------------------------
    def sync(self) -> SyncReport:
        """Bring the schedules table in line with this clock's definitions (unless they are stale)."""
        now = self.clock.now()
        report = SyncReport()
        set_hash = _set_hash(self.definitions.values())
        with self.store.transaction() as tx:
            tx.run("insert_schedule_set", hash=set_hash, keys=Json(sorted(self.definitions)), now=now,
                   **self.source.params())
            mine = tx.one("get_schedule_set", hash=set_hash)
            newest = tx.one("newest_schedule_set")
            assert mine is not None and newest is not None
            report.stale = newest["hash"] != set_hash and newest["first_seen_at"] > mine["first_seen_at"]
            existing = {r["key"]: r for r in ledger.list_schedules(tx)}
            if not report.stale:
                report.added = self._add_new(tx, [d for k, d in self.definitions.items() if k not in existing], now)
                for key, d in self.definitions.items():
                    params = self._params(d, now)
                    row = existing.get(key)
                    if row is None:
                        continue
                    elif row["state"] == "retired":
                        report.ignored_retired.append(key)
                    elif self._code_replaces(row, d):
                        # Counts from the change, never from before the newest recorded instant (one
                        # recorded while a wall clock ran fast may be later than now).
                        last = ledger.last_fire_at(tx, key)
                        if tx.one("update_schedule", **params, active_since=max(x for x in (now, last) if x)):
                            report.changed.append(key)
                            audit.record(tx, now=now, kind="schedule.changed", subject=f"schedule:{key}",
                                         source=self.source, process_id=self.process_id,
                                         detail={"old": {"expression": row["expression"], "tz": row["tz"]},
                                                 "new": {"expression": d.expression, "tz": d.tz}, "origin": "code",
                                                 "replaced_runtime_edit": row["origin"] == "runtime"})
                for key, row in existing.items():
                    if key not in self.definitions and row["state"] != "retired":
                        ledger.set_schedule_state(tx, key, "retired", now)
                        report.retired.append(key)
                        audit.record(tx, now=now, kind="schedule.retired", subject=f"schedule:{key}",
                                     source=self.source, process_id=self.process_id,
                                     detail={"expression": row["expression"], "tz": row["tz"]})
            else:
                report.ignored_retired = [k for k in self.definitions
                                          if k in existing and existing[k]["state"] == "retired"]
                audit.record(tx, now=now, kind="clock.stale_definitions", subject=f"process:{self.process_id}",
                             source=self.source, process_id=self.process_id,
                             detail={"set": set_hash, "newest": newest["hash"]})
        self.stale = report.stale
        self._load(now)
        for line in report.lines():
            log.info(line, extra={"event": "clock.sync"})
            self.echo(line)
        return report

    def _add_new(self, tx: Tx, new: list[ScheduleDef], now: datetime) -> list[str]:
        """Insert the schedules ``new`` with one statement (10,000 at a first start-up); return the keys added."""
        if not new:
            return []
        rows = [[d.key, d.expression, d.tz, d.dst_gap, d.dst_fold, d.catchup, d.catchup_window, d.overlap, d.task,
                 d.args, d.queue, d.definition_hash()] for d in new]
        added = {r["key"] for r in tx.run("insert_schedules", rows=Json(rows), now=now)}
        keys = [d.key for d in new if d.key in added]
        audit.record_many(tx, now=now, source=self.source, process_id=self.process_id,
                          events=[("schedule.added", f"schedule:{d.key}",
                                   {"expression": d.expression, "tz": d.tz, "task": d.task})
                                  for d in new if d.key in added])
        return keys

    @staticmethod
    def _code_replaces(row: dict[str, Any], d: ScheduleDef) -> bool:
        """Whether the code's definition ``d`` replaces the stored one at sync.

        A run-time edit overrides the code until a deploy changes the code's definition: it is
        replaced only when ``d`` differs from the code definition it overrode (``code_hash``).
        """
        if row["origin"] == "runtime":
            return bool(d.definition_hash() != row["code_hash"])
        return bool(row["definition_hash"] != d.definition_hash())

    def _effective(self, row: dict[str, Any]) -> ScheduleDef | None:
        """The definition this clock fires for ``row``, or None if it may not fire it.

        A run-time edit is fired from the stored row (by every clock that knows the key); a code
        definition only by clocks whose own definition is the stored one (an old version still
        running fires nothing it would define differently). Retired schedules never fire.
        """
        code = self.definitions.get(row["key"])
        if code is None or row["state"] == "retired":
            return None
        if row["origin"] == "runtime":
            cached = self._runtime.get(row["key"])
            if cached is None or cached[0] != row["version"]:
                cached = (int(row["version"]), ScheduleDef.from_row(row))
                self._runtime[row["key"]] = cached
            return cached[1]
        return code if row["definition_hash"] == code.definition_hash() else None

    @staticmethod
    def _params(d: ScheduleDef, now: datetime) -> dict[str, Any]:
        return {"key": d.key, "expression": d.expression, "tz": d.tz, "dst_gap": d.dst_gap, "dst_fold": d.dst_fold,
                "catchup": d.catchup, "catchup_window": d.catchup_window, "overlap": d.overlap, "task": d.task,
                "args": Json(d.args), "queue": d.queue, "definition_hash": d.definition_hash(), "now": now}

    def _load(self, now: datetime) -> None:
        """Re-read the schedule rows that changed since the last read; keep those this clock may fire.

        Only keys, versions and states are read for all schedules (100,000 rows every 30 s would otherwise cost
        more CPU than firing them); whole rows only for what is new or changed.
        """
        versions = {r["key"]: (r["version"], r["state"]) for r in ledger.schedule_versions(self.store)}
        changed = [key for key, v in versions.items() if self._seen.get(key) != v]
        rows = ledger.list_schedules(self.store, keys=None if len(changed) == len(versions) else changed)
        for key in set(self._seen) - set(versions):  # deleted rows
            self._forget(key)
        for r in rows:
            d = self._effective(r)
            if d is None:
                self._forget(r["key"])
                self._seen[r["key"]] = (r["version"], r["state"])
                continue
            if r["key"] not in self._parsed or self._rows.get(r["key"], {}).get("version") != r["version"]:
                if r["key"] in self._parsed:
                    log.info("schedule %s changed (version %s): %s", r["key"], r["version"], d.schedule().describe(),
                             extra={"event": "clock.schedule_changed", "schedule": r["key"]})
                self._parsed[r["key"]] = d.schedule()
                self._next.pop(r["key"], None)
                self._floor.pop(r["key"], None)
            self._keep_row(r)
        unknown = [key for key in self._rows if key not in self._next]
        if unknown:  # one query for every cursor (10,000 at start-up), not one per schedule
            last = {r["key"]: r["last_fire_at"] for r in self.store.read("last_fires_at_or_before", keys=unknown,
                                                                          now=now)}
            if any(self._rows[key]["active_since"] > now for key in unknown):
                with self.store.transaction() as tx:  # persisted, so that the fire paths' own reads agree
                    clamped = tx.run("clamp_active_since", now=now)
                for r in clamped:
                    if r["key"] in self._rows:
                        self._rows[r["key"]]["active_since"] = r["active_since"]
            for key in unknown:
                cursor = schedule_cursor(last.get(key), self._rows[key]["active_since"], now)
                self._next[key] = self._parsed[key].next_after(cursor)
                self._floor[key] = cursor
        self._last_load = now

    def _keep_row(self, row: dict[str, Any]) -> None:
        """Hold ``row`` as the schedule this clock fires (its version and state as last seen)."""
        key = row["key"]
        self._rows[key] = row
        self._seen[key] = (row["version"], row["state"])
        if row.get("overlap") == "buffer_one":
            self._buffered.add(key)
        else:
            self._buffered.discard(key)

    def _forget(self, key: str) -> None:
        """Stop firing ``key`` (retired, deleted, or no longer this clock's definition) until a re-read says so."""
        self._rows.pop(key, None)
        self._seen.pop(key, None)
        self._next.pop(key, None)
        self._floor.pop(key, None)
        self._buffered.discard(key)

    # --- firing --------------------------------------------------------------------------------
    def start(self) -> list[Fire]:
        """Register, migrate-free sync, then the first tick with its catch-up decisions printed."""
        self.time_source = describe_time_source(self.clock)
        if self.process_id is None:
            self.process_id = processes.register(self.store, role="clock", source=self.source, clock=self.clock,
                                               info={"schedules": sorted(self.definitions),
                                                     "time_source": self.time_source})
        self.echo(f"time source: {self.time_source}")
        self.sync()
        fires = self.tick(startup=True)
        self._echo_idle(fires)
        return fires

    def _echo_idle(self, fires: list[Fire]) -> None:
        fired = {f.schedule_key for f in fires}  # a set: start-up stays linear in the number of schedules
        for key in sorted(self._rows):
            if key not in fired:
                nxt = self._next.get(key)
                if nxt is not None:
                    local = self._parsed[key].local(nxt)
                    self.echo(f"{key}: no occurrence missed; next fire {local.strftime('%Y-%m-%d %H:%M %Z')} "
                              f"({self._parsed[key].tz}) = {nxt.strftime('%Y-%m-%d %H:%M')} UTC")

    def tick_once(self, *, at: datetime | None = None, max_early: float = TICK_MAX_EARLY) -> list[Fire]:
        """One pass for deployments without an always-on clock (cron, PaaS scheduler, Kubernetes CronJob).

        Syncs the definitions, fires every occurrence due per the ledger and each schedule's
        catch-up policy, and returns; safe to run late, twice or concurrently (the ledger keeps
        each occurrence to one job). The pass registers as a process of role ``tick`` and
        records its stop.

        Args:
            at: the instant an external scheduler named (e.g. an EventBridge event's ``time``):
                occurrences are due up to ``at`` instead of the clock's now, so the named instant
                maps to the schedule's occurrence at or before it, and a duplicate or early
                delivery of the same event finds it already recorded.
            max_early: seconds ``at`` may lie ahead of this clock's now (an early delivery).

        Returns:
            The decisions made (empty when nothing was due).

        Raises:
            OncebeatError: ``at`` is more than ``max_early`` seconds in the future.
            ValueError: ``at`` is naive.
        """
        now = self.clock.now()
        horizon = now if at is None else require_aware(at, "at")
        if (horizon - now).total_seconds() > max_early:
            raise OncebeatError(
                f"--at {horizon.isoformat()} is {(horizon - now).total_seconds():.0f} s after this clock's time "
                f"({now.isoformat()}); an external scheduler names an instant that has come (at most "
                f"{max_early:.0f} s early). Check the scheduler's event time and this host's clock (--time-source).")
        self.time_source = describe_time_source(self.clock)
        self.process_id = processes.register(self.store, role="tick", source=self.source, clock=self.clock,
                                             info={"schedules": sorted(self.definitions),
                                                   "time_source": self.time_source,
                                                   "at": at.isoformat() if at is not None else None})
        self.echo(f"time source: {self.time_source}" + (f"; occurrences due up to --at {horizon.isoformat()}"
                                                        if at is not None else ""))
        try:
            self.sync()
            self._release_buffered(now)
            fires = self._fire_due(sorted(self._rows), now, horizon, startup=False)
            self._echo_idle(fires)
        finally:
            self._stop_process()
        return fires

    def tick(self, *, startup: bool = False) -> list[Fire]:
        """Fire every schedule whose next instant has come; return the decisions made by this clock."""
        now = self.clock.now()
        self._notice_step(now)
        due = self._next.due(now)
        if self._resync_due(now, busy=bool(due)):
            self._load(now)
            due = self._next.due(now)
        self._release_buffered(now)
        try:
            return self._fire_due(due, now, now, startup=startup)
        finally:  # after the fire: a burst's first batch does not wait for this transaction
            if self.process_id is not None and (self._last_heartbeat is None or abs(
                    (now - self._last_heartbeat).total_seconds()) >= HEARTBEAT_SECONDS):
                processes.heartbeat(self.store, self.process_id, now)  # the doctor's multiple-clocks check reads it
                self._last_heartbeat = now

    def _resync_due(self, now: datetime, *, busy: bool) -> bool:
        """Whether this tick re-reads the schedules table before firing.

        A tick with schedules due fires first and leaves the re-read (10,000 rows: ~0.3 s) to a later tick, so a
        burst is not delayed by it: the fire paths check each row against the database anyway (the set-based one
        by version in SQL, the one-by-one path by reading the row). A clock that is due something at every tick
        still re-reads at twice the interval.
        """
        if self._last_load is None:
            return True
        age = (now - self._last_load).total_seconds()
        return age >= (2 * self.resync_interval if busy else self.resync_interval)

    def _release_buffered(self, now: datetime) -> None:
        """Start the held run of each ``buffer_one`` schedule whose previous run has finished (before firing,
        so a held run keeps its place ahead of a newer occurrence)."""
        for key in sorted(self._buffered):
            if key in self._rows:
                job_id = release_buffered(self.store, key, now=now)
                if job_id is not None:
                    log.info("%s: held run (job %s) released: the previous run finished", key, job_id,
                             extra={"event": "clock.overlap_released", "schedule": key})

    def _notice_step(self, now: datetime) -> None:
        """A wall clock stepped back: forget in-memory cursors, re-derive them from the ledger."""
        before, self._last_now = self._last_now, now
        if before is None or now >= before:
            return
        line = (f"wall clock stepped back {(before - now).total_seconds():.3f} s "
                f"({before.strftime('%H:%M:%S')} -> {now.strftime('%H:%M:%S')} UTC): "
                "due occurrences are re-read from the ledger, none repeats")
        log.warning(line, extra={"event": "clock.time_stepped"})
        self.echo(line)
        with self.store.transaction() as tx:
            audit.record(tx, now=now, kind="clock.time_stepped", subject=f"process:{self.process_id}",
                         source=self.source, process_id=self.process_id,
                         detail={"from": before.isoformat(), "to": now.isoformat(),
                                 "seconds": (now - before).total_seconds(), "time_source": self.time_source})
        self._next.clear()
        self._floor.clear()
        self._last_load = None
        self._load(now)

    def _fire_due(self, due: list[str], now: datetime, horizon: datetime, *, startup: bool) -> list[Fire]:
        fires: list[Fire] = []
        order = {key: i for i, key in enumerate(due)}  # fires are returned in the order of ``due``
        if not startup and len(due) > 1:
            # The common case, many schedules each with one on-time instant, is recorded set-based; whatever the
            # ledger does not confirm (and every catch-up, pause, overlap or period decision) goes one by one.
            on_time, rest = self._split_on_time(due, horizon)
            if on_time:
                done, unconfirmed = self._fire_on_time(on_time, now, horizon)
                fires.extend(done)
                due = sorted(rest + unconfirmed)
        # Many schedules due at one instant commit together (FIRE_BATCH per transaction): one commit per
        # batch instead of per schedule. In-memory cursors move only after the commit.
        for start in range(0, len(due), FIRE_BATCH):
            decided: list[tuple[str, tuple[list[Fire], str | None] | None]] = []
            with self.store.transaction(bounded=True) as tx:  # a stalled fire must not hold other clocks long
                for key in due[start:start + FIRE_BATCH]:
                    decided.append((key, self._record_fires(tx, key, now, horizon, startup=startup)))
            for key, outcome in decided:
                fires.extend(self._after_commit(key, outcome, horizon))
        fires.sort(key=lambda f: order[f.schedule_key])  # stable: each schedule's own fires stay in order
        return fires

    def _split_on_time(self, due: list[str], horizon: datetime) -> tuple[list[_OnTime], list[str]]:
        """Split ``due`` into schedules whose only due instant is on time (as this clock's memory says) and the rest.

        On time means: active, overlap ``allow``, one instant ``_next`` due by ``horizon`` within ``misfire_grace``
        and the catch-up window, and the next one after ``horizon``. :meth:`_fire_on_time` then asks the ledger.
        """
        on_time: list[_OnTime] = []
        rest: list[str] = []
        for key in due:
            c = self._prepared_for(key)
            if (c is None or c.fire_at > horizon or c.after <= horizon
                    or (horizon - c.fire_at).total_seconds() > min(self.misfire_grace, c.definition.catchup_window)):
                rest.append(key)
            else:
                on_time.append(c)
        return on_time, rest

    def _prepared_for(self, key: str) -> _OnTime | None:
        """``key``'s next instant prepared for the set-based fire (cached), or None if it must go one by one."""
        row, fire_at, floor = self._rows.get(key), self._next.get(key), self._floor.get(key)
        if row is None or fire_at is None or floor is None or row["state"] != "active" or key not in self._parsed:
            return None
        c = self._prepared.get(key)
        if c is not None and c.fire_at == fire_at and c.floor == floor and c.version == row["version"] \
                and c.sched is self._parsed[key]:
            return c
        definition = self._effective(row)
        if definition is None or definition.overlap != "allow":
            return None
        c = _OnTime.prepare(key, int(row["version"]), definition, self._parsed[key], fire_at, floor)
        self._prepared[key] = c
        return c

    def prepare_ahead(self, seconds: float, *, horizon: float = PREPARE_HORIZON) -> int:
        """Spend at most ``seconds`` preparing, for the set-based fire, the instants due within ``horizon`` seconds.

        :meth:`run` calls it while it waits, so a burst (10,000 schedules due at 08:00) finds its rows ready, and
        100,000 hourly schedules are prepared a few minutes ahead, spread over the hour. A complete pass is
        repeated only every ``PREPARE_EVERY`` seconds (finding the due keys is a walk over them). Returns how many.
        """
        now = self.clock.now()
        if self._prepare_pass is not None and 0 <= (now - self._prepare_pass).total_seconds() < PREPARE_EVERY:
            return 0
        deadline = time.monotonic() + seconds
        done = 0
        for key in self._next.due_unordered(now + timedelta(seconds=horizon)):
            if time.monotonic() >= deadline:
                return done  # the pass was cut short: the next wait goes on with it
            c = self._prepared.get(key)
            if c is None or c.fire_at != self._next[key]:
                self._prepared_for(key)
                done += 1
        self._prepare_pass = now
        return done

    def _fire_on_time(self, due: list[_OnTime], now: datetime, horizon: datetime) -> tuple[list[Fire], list[str]]:
        """Record ``due``'s on-time occurrences and their jobs set-based: a few statements per batch.

        The ledger decides, not this clock's memory: a row it does not confirm (another process paused, changed
        or fired the schedule, or the period was served) is returned for the one-schedule path. Returns the fires
        and the keys left to that path.
        """
        fires: list[Fire] = []
        left: list[str] = []
        committed: list[tuple[dict[str, _OnTime], list[Fire]]] = []
        chunks = [due[start:start + FIRE_SET_BATCH] for start in range(0, len(due), FIRE_SET_BATCH)]
        try:
            if len(chunks) > 1 and FIRE_SET_THREADS > 1 and self.store.backend == "postgres":
                # Batches hold disjoint schedules and each is checked and inserted in its own transaction, so
                # they may run at once: the server works on two backends (on a loaded machine, two runnable
                # processes instead of one). SQLite has one writer: its batches go one after another.
                with ThreadPoolExecutor(max_workers=FIRE_SET_THREADS, thread_name_prefix="clock-fire") as pool:
                    futures = [pool.submit(self._fire_batch, chunk, now, horizon) for chunk in chunks]
                    failed: BaseException | None = None
                    for future in futures:  # every batch ends (commits or rolls back) before any is reported
                        try:
                            committed.append(future.result())
                        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the others ended
                            failed = failed or exc
                    if failed is not None:
                        raise failed
            else:
                for chunk in chunks:
                    committed.append(self._fire_batch(chunk, now, horizon))
        finally:
            # The bookkeeping of each committed batch waits until every batch is committed, so the next batch's
            # statements start (and its jobs become visible) that much sooner; a failed batch does not keep the
            # ones committed before it from moving their cursors.
            recorded_listened = telemetry.listening("occurrence.recorded")
            logged = self._echoes or log.isEnabledFor(logging.INFO)  # 10,000 fires at once: format only if read
            floor, nxt = self._floor, self._next
            for batch, batch_fires in committed:
                for f in batch_fires:
                    c = batch.pop(f.schedule_key)
                    if f.inserted:
                        self.fires += 1
                        if recorded_listened:
                            telemetry.emit("occurrence.recorded", {"schedule": c.key, "outcome": "enqueued",
                                                                   "lag_seconds": (now - c.fire_at).total_seconds(),
                                                                   "occurrence_id": f.occurrence_id,
                                                                   "job_id": f.job_id, "fire_at": c.fire_at,
                                                                   "recorded_at": now})
                        if logged:
                            text = f.describe()
                            log.info("fired %s", text, extra={"event": "clock.fired", "schedule": c.key})
                            self.echo(f"fired {text}")
                    # _after_commit for one on-time fire: the decided instant is the floor, and c.after is the
                    # instant next_after(horizon) gives (none lies in (fire_at, horizon]), already known
                    floor[c.key] = c.fire_at
                    nxt[c.key] = c.after
                fires.extend(batch_fires)
                left.extend(batch)
        return fires, left

    def _fire_batch(self, chunk: list[_OnTime], now: datetime,
                    horizon: datetime) -> tuple[dict[str, _OnTime], list[Fire]]:
        """Record one batch of :meth:`_fire_on_time` in its own transaction; returns it (key -> prepared instant)
        and its fires (the keys the ledger passed, in order). Touches no clock state but the store, so batches
        may run in threads."""
        batch = {c.key: c for c in chunk}
        rows = "[" + ",".join(c.row for c in batch.values()) + "]"
        with self.store.transaction(bounded=True) as tx:  # a stalled fire must not hold other clocks long
            recorded = tx.run("fire_on_time", rows=rows, horizon=horizon, now=now,
                              tzdata_version=TZDATA_VERSION, **self.source.params())
            inserted = {r["schedule_key"]: int(r["id"]) for r in recorded if r["id"] is not None}
            passed = dict.fromkeys(r["schedule_key"] for r in recorded)  # in order; inserted or a duplicate
            jobs = self._enqueue_runs(tx, batch, inserted)
            return batch, [self._on_time_fire(tx, batch[key], inserted.get(key), jobs, now) for key in passed]

    def _enqueue_runs(self, tx: Tx, batch: dict[str, _OnTime], inserted: dict[str, int]) -> dict[int, int]:
        """Enqueue the runs of the occurrences ``inserted`` (key -> occurrence id), each under its occurrence's job id.

        One :meth:`Queue.enqueue_runs_select` per (task, queue, options); returns occurrence id -> job id.
        Raises StoreError (rolling the batch back) if an occurrence got no job: an enqueued one must have it.
        """
        groups: dict[tuple[str, str | None, int | None, int | None], list[int]] = {}
        for key, occ_id in inserted.items():
            d = batch[key].definition
            options = self.task_options.get(d.task) or {}
            groups.setdefault((d.task, d.queue, options.get("priority"), options.get("max_attempts")),
                              []).append(occ_id)
        jobs: dict[int, int] = {}
        for (task, queue, priority, max_attempts), ids in groups.items():
            # Each job takes the id its occurrence already names (fire_on_time drew it) and serves that occurrence
            # (run_of: one unfinished run per occurrence): neither row is updated afterwards.
            for job_id, run_of in self.queue.enqueue_runs_select(
                    tx, "scheduled_run_sources", task=task, queue=queue, priority=priority,
                    max_attempts=max_attempts, ids=ids):
                jobs[run_of] = job_id
        if len(jobs) != len(inserted):
            raise StoreError(f"set-based fire: {len(inserted)} occurrences recorded but {len(jobs)} jobs enqueued")
        return jobs

    def _on_time_fire(self, tx: Tx, c: _OnTime, occ_id: int | None, jobs: dict[int, int], now: datetime) -> Fire:
        """The :class:`Fire` of one schedule the ledger confirmed (``occ_id`` None: a rejected duplicate, audited)."""
        local = c.local
        if occ_id is None:  # another clock recorded this instant after our check: its insert won
            telemetry.emit("occurrence.duplicate", {"schedule": c.key})
            audit.record(tx, now=now, kind="occurrence.duplicate_rejected", subject=f"schedule:{c.key}",
                         source=self.source, process_id=self.process_id,
                         detail={"fire_at": c.fire_at.isoformat(), "local": local.isoformat(),
                                 "attempted": "enqueued"})
            return Fire(schedule_key=c.key, fire_at=c.fire_at, local=local, outcome="enqueued", inserted=False)
        return Fire(schedule_key=c.key, fire_at=c.fire_at, local=local, outcome="enqueued", inserted=True,
                    occurrence_id=occ_id, job_id=jobs[occ_id])

    def _record_fires(self, tx: Tx, key: str, now: datetime, horizon: datetime, *,
                      startup: bool) -> tuple[list[Fire], str | None] | None:
        """Decide and record ``key``'s occurrences due by ``horizon`` in ``tx``; None if it may no longer fire.

        ``now`` is the wall time the records carry; ``horizon`` is the instant up to which
        occurrences are due (``now``, or the instant an external scheduler named: ``tick --at``).
        """
        fires: list[Fire] = []
        # Decide from the stored row, not this clock's copy: another process may have paused,
        # resumed, retired or changed the schedule (a run-time edit) since the last re-read.
        row = ledger.get_schedule(tx, key)
        definition = self._effective(row) if row is not None else None
        if row is None or definition is None:
            return None
        if self._rows.get(key, {}).get("version") != row["version"] or key not in self._parsed:
            self._parsed[key] = definition.schedule()
        sched = self._parsed[key]
        self._keep_row(row)
        last = tx.one("last_fire_at_or_before", key=key, now=horizon)
        cursor = schedule_cursor((last or {}).get("last_fire_at"), row["active_since"], horizon)
        window_start = horizon - timedelta(seconds=definition.catchup_window)
        outside = 0
        passed_over = _PassedOver(PASSED_OVER_ROWS)
        if cursor < window_start:
            for instant in sched.between(cursor, window_start):
                passed_over.add(instant)
                outside += 1
                if outside >= 100_000:
                    break
            cursor = window_start
        instants = list(sched.between(cursor, horizon))
        if len(instants) > MAX_LEDGER_ROWS_PER_TICK:
            outside += len(instants) - MAX_LEDGER_ROWS_PER_TICK
            for instant in instants[:-MAX_LEDGER_ROWS_PER_TICK]:
                passed_over.add(instant)
            instants = instants[-MAX_LEDGER_ROWS_PER_TICK:]
        self._record_passed_over(tx, definition, sched, passed_over, now)
        decisions, on_time = self._decide(row, definition, instants, horizon)
        for instant, outcome, reason in self._period_rule(tx, key, sched, decisions):
            fires.append(fire_occurrence(tx, queue=self.queue, task_options=self.task_options.get(definition.task),
                                         definition=definition, schedule=sched, instant=instant, outcome=outcome,
                                         source=self.source, now=now, process_id=self.process_id, reason=reason))
        late = [f for f in fires if f.fire_at != on_time]
        summary = None
        if outside or late:
            summary = self._summary(key, definition, late, outside, startup)
            audit.record(tx, now=now, kind="clock.catchup", subject=f"schedule:{key}", source=self.source,
                         process_id=self.process_id,
                         detail={"summary": summary, "missed_outside_window": outside,
                                 "outcomes": {o: sum(1 for f in late if f.outcome == o and f.inserted)
                                              for o in {f.outcome for f in late}},
                                 "cursor": cursor.isoformat(), "at_startup": startup})
        return fires, summary

    def _record_passed_over(self, tx: Tx, definition: ScheduleDef, sched: Schedule, passed: _PassedOver,
                            now: datetime) -> None:
        """Record the instants a catch-up passed over (before its window) ``missed``, with the policy that decided.

        The newest :data:`PASSED_OVER_ROWS` one by one; older ones, if any, as one row at the newest of them whose
        reason counts them (first and last instant). The downtime then shows in the ledger, the doctor and the
        dashboard, not only in an audit event; the rows are older than the cursor, so nothing fires for them.
        """
        if not passed.count:
            return
        window = f"{definition.catchup_window / 3600:g} h"
        reason = f"outside the catch-up window (policy {definition.catchup}, window {window})"
        if passed.summary_at is not None and passed.first is not None:
            earlier = passed.count - len(passed.kept)
            fire_occurrence(tx, queue=self.queue, definition=definition, schedule=sched, instant=passed.summary_at,
                            outcome="missed", source=self.source, now=now, process_id=self.process_id,
                            reason=f"{earlier} instants from {passed.first.isoformat()} to "
                                   f"{passed.summary_at.isoformat()} not run: {reason}")
        for instant in passed.kept:
            fire_occurrence(tx, queue=self.queue, definition=definition, schedule=sched, instant=instant,
                            outcome="missed", source=self.source, now=now, process_id=self.process_id, reason=reason)

    def _period_rule(self, tx: Tx, key: str, sched: Schedule,
                     decisions: list[tuple[datetime, str, str | None]]) -> list[tuple[datetime, str, str | None]]:
        """Turn an ``enqueued`` decision into ``coalesced`` when its business period already had a run.

        Applies to schedules that fire at most once per local day, week or month; the period
        of a recorded run is that of its stored business date (in the zone it fired in), so a
        zone or expression change never serves one period twice.
        """
        period = sched.business_period()
        if period is None:
            return decisions
        out: list[tuple[datetime, str, str | None]] = []
        for instant, outcome, reason in decisions:
            if outcome == "enqueued":
                first, last = period_bounds(period, sched.local(instant).date())
                served = tx.one("period_served", key=key, first=first, last=last,
                                from_at=datetime(first.year, first.month, first.day, tzinfo=UTC) - timedelta(days=1),
                                to_at=datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=2))
                if served is not None:
                    line = (f"{key}: {sched.local(instant).isoformat()} ({sched.tz}) not fired: {PERIOD_SERVED} "
                            f"(the {period} of {first.isoformat()} ran at {sched.local(served['fire_at']).isoformat()}"
                            f", {served['outcome']})")
                    log.info(line, extra={"event": "clock.period_served", "schedule": key})
                    self.echo(line)
                    outcome, reason = "coalesced", PERIOD_SERVED
            out.append((instant, outcome, reason))
        return out

    def _after_commit(self, key: str, outcome: tuple[list[Fire], str | None] | None, now: datetime, *,
                      next_fire: datetime | None = None) -> list[Fire]:
        """Move ``key``'s cursor past ``now`` after its decisions committed, and log the fires.

        ``next_fire``: the schedule's first instant after ``now`` when the caller already computed it.
        """
        if outcome is None:
            self._forget(key)
            self._last_load = None  # re-read the schedules table (this row too) on the next tick
            return []
        fires, summary = outcome
        # The newest decided instant is the newest at or before `now`: the schedule has none in (it, next).
        newest = max((f.fire_at for f in fires), default=None)
        if newest is None:
            self._floor.pop(key, None)
        else:
            self._floor[key] = newest
        if summary:
            log.info(summary, extra={"event": "clock.catchup", "schedule": key})
            self.echo(summary)
        for f in fires:
            if f.inserted and f.outcome == "enqueued":
                self.fires += 1
                if self._echoes or log.isEnabledFor(logging.INFO):  # 10,000 fires at once: format only if read
                    text = f.describe()
                    log.info("fired %s", text, extra={"event": "clock.fired", "schedule": key})
                    self.echo(f"fired {text}")
        self._next[key] = next_fire if next_fire is not None else self._parsed[key].next_after(now)
        return fires

    def _decide(self, row: dict[str, Any], d: ScheduleDef, instants: list[datetime],
                now: datetime) -> tuple[list[tuple[datetime, str, str | None]], datetime | None]:
        """Outcome and reason of each due instant, and the one instant that is on time (if any).

        Only the newest due instant can be on time: an older one has a successor at or before
        ``now``, so it is more than one period late whatever ``misfire_grace`` says.
        """
        if row["state"] == "paused":
            return [(t, "paused", _REASONS["paused"]) for t in instants], None
        on_time = instants[-1] if instants and (now - instants[-1]).total_seconds() <= self.misfire_grace else None
        late = [t for t in instants if t != on_time]
        out: list[tuple[datetime, str, str | None]] = []
        if d.catchup == "none":
            out += [(t, "missed", _REASONS["missed"]) for t in late]
        elif d.catchup == "latest":
            keep = None if on_time else (late[-1] if late else None)
            out += [(t, "enqueued", None) if t == keep else (t, "coalesced", _REASONS["coalesced"]) for t in late]
        else:
            out += [(t, "enqueued", None) for t in late]
        if on_time is not None:
            out.append((on_time, "enqueued", None))
        return out, on_time

    def _summary(self, key: str, d: ScheduleDef, late: list[Fire], outside: int, startup: bool) -> str:
        counts: dict[str, int] = {}
        for f in late:
            label = f"{f.outcome} ({f.reason})" if f.reason == PERIOD_SERVED else f.outcome
            counts[label] = counts.get(label, 0) + 1
        parts = [f"{n} {o}" for o, n in sorted(counts.items())]
        if outside:
            parts.append(f"{outside} missed outside the catch-up window ({d.catchup_window:.0f} s)")
        total = len(late) + outside
        when = "during downtime" if startup else "since the last tick"
        decided = ", ".join(parts) or "nothing to do"
        return f"{key}: {total} occurrence(s) missed {when}, policy {d.catchup}: {decided}"

    def next_fire_at(self) -> datetime | None:
        """The earliest instant at which this clock has something to fire (None without schedules)."""
        return self._next.earliest()

    # --- operator actions ----------------------------------------------------------------------
    def trigger(self, key: str, *, kind: str = "manual", tx: Tx | None = None) -> Fire:
        """Fire ``key`` now, outside its schedule (recorded ``manual`` with this process's provenance).

        ``tx``: fire in the caller's transaction (the definition is read there; sync first with :meth:`known`).
        """
        if tx is None:
            self._definition_for(key)  # a first trigger before any clock ran syncs the definitions (own transaction)
            with self.store.transaction() as own:
                return self.trigger(key, kind=kind, tx=own)
        definition, sched = self._definition_for(key, tx)
        # Full precision: a manual fire never takes the identity of a scheduled instant.
        now = self.clock.now()
        fire = fire_occurrence(tx, queue=self.queue, task_options=self.task_options.get(definition.task),
                               definition=definition, schedule=sched, instant=now, outcome="manual",
                               source=self.source.with_kind(kind), now=self.clock.now())
        log.info("manual trigger %s", fire.describe(), extra={"event": "clock.manual"})
        return fire

    def backfill(self, key: str, start: datetime, end: datetime) -> list[Fire]:
        """Enqueue every occurrence of ``key`` in ``[start, end]`` not already in the ledger (``backfilled``)."""
        start, end = require_aware(start, "start"), require_aware(end, "end")
        if end < start:
            raise OncebeatError("backfill: end is before start")
        if end > self.clock.now():
            raise OncebeatError("backfill: end is in the future; backfill only covers past occurrences")
        definition, sched = self._definition_for(key)
        fires: list[Fire] = []
        with self.store.transaction() as tx:
            for instant in sched.between(start - timedelta(microseconds=1), end):
                fire = fire_occurrence(tx, queue=self.queue, task_options=self.task_options.get(definition.task),
                                       definition=definition, schedule=sched, instant=instant, outcome="backfilled",
                                       source=self.source.with_kind("cli"), now=self.clock.now())
                fires.append(fire if fire.inserted else replace(fire, existing=_existing_text(tx, key, instant)))
        return fires

    def known(self, key: str) -> None:
        """Check that ``key`` can be fired or paused, syncing the code's definitions first when no clock has yet
        (its own transactions): call it before :meth:`trigger` or :meth:`set_state` in a caller's transaction.

        Raises:
            OncebeatError: ``key`` is unknown or retired.
        """
        self._definition_for(key)

    def _definition_for(self, key: str, tx: Tx | None = None) -> tuple[ScheduleDef, Schedule]:
        row = ledger.get_schedule(tx or self.store, key)
        if row is None and key in self.definitions and tx is None:
            # A trigger or backfill before any clock ran: record the definitions first, as a clock would (audited).
            self.sync()
            row = ledger.get_schedule(self.store, key)
        if row is None:
            known = ", ".join(r["key"] for r in ledger.list_schedules(tx or self.store)) or "none"
            defined = ", ".join(sorted(self.definitions)) or "none"
            raise OncebeatError(f"no schedule {key!r}: not defined by this app (defined: {defined}) and not in the "
                                f"database (known: {known}); check the key or --app")
        if row["state"] == "retired":
            raise OncebeatError(f"schedule {key!r} is retired; it never fires")
        definition = ScheduleDef.from_row(row)
        return definition, definition.schedule()

    def set_state(self, key: str, state: str, *, tx: Tx | None = None) -> bool:
        """Pause (``paused``) or resume (``active``) a schedule. Resuming never bursts: it counts from now.

        A pause also holds the schedule's runs not yet started (no worker claims them); resuming releases them,
        each to run once (:mod:`oncebeat.pauses`). The audit event counts them (``held_runs``, ``released_runs``).

        ``tx``: change it in the caller's transaction (call :meth:`known` before opening it).

        Returns:
            False when the schedule is already in that state.
        Raises:
            OncebeatError: ``key`` is unknown or retired (before any clock ran, the definitions are synced first).
        """
        if state not in ("paused", "active"):
            raise ValueError("state must be 'paused' or 'active'")
        if tx is None:
            self._definition_for(key)
            with self.store.transaction() as own:
                return self.set_state(key, state, tx=own)
        self._definition_for(key, tx)
        now = self.clock.now()
        # the runs its pause holds (queued, not started: oncebeat.pauses), counted while the schedule is paused
        before = None if state == "paused" else _held_runs(tx, key)
        changed = ledger.set_schedule_state(tx, key, state, now)
        if changed:
            kind = "api" if self.source.kind == "api" else "cli"  # an API client's pause says so (G8)
            detail = {"held_runs": _held_runs(tx, key)} if before is None else {"released_runs": before}
            audit.record(tx, now=now, kind=f"schedule.{'paused' if state == 'paused' else 'resumed'}",
                         subject=f"schedule:{key}", source=self.source.with_kind(kind), detail=detail)
        self._last_load = None
        return changed

    # --- real process --------------------------------------------------------------------------
    def request_stop(self, signum: int | None = None, *_: Any) -> None:
        """Stop after the current tick; ``signum`` (a signal handler's argument) names why in the stop line."""
        if not self.stop_requested.is_set():
            self.stop_reason = signal.Signals(signum).name if signum else "stop requested"
            log.info("clock stopping: %s", self.stop_reason, extra={"event": "clock.stopping"})
        self.stop_requested.set()

    def run(self, *, install_signals: bool = True, stop_after: float | None = None) -> None:
        """Tick every ``tick_interval`` seconds until SIGTERM/SIGINT (or ``stop_after`` seconds)."""
        if install_signals:
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        started = time.monotonic()
        log.info("clock starting: %d schedule(s), database %s, oncebeat %s, pid %d", len(self.definitions),
                 self.store.url, self.source.version, os.getpid(), extra={"event": "clock.starting"})
        if not self._start_retrying(started, stop_after):
            self._stop_process()
            return
        log.info("clock started: time source %s", self.time_source, extra={"event": "clock.started"})
        while not self.stop_requested.is_set():
            if stop_after is not None and time.monotonic() - started >= stop_after:
                self.stop_reason = f"ran its {stop_after:g} s"
                break
            try:
                self.tick()
            except OncebeatError as exc:  # a blip: the ledger makes the next tick safe to repeat
                log.warning("tick failed: %s", exc, extra={"event": "clock.tick_failed"})
            nxt = self.next_fire_at()
            wait = self.tick_interval
            if nxt is not None:
                wait = max(0.01, min(wait, (nxt - self.clock.now()).total_seconds()))
            if wait > 0.1:
                spent = time.monotonic()
                self.prepare_ahead(wait / 2)
                wait = max(0.01, wait - (time.monotonic() - spent))
            self.stop_requested.wait(wait)
        self._stop_process()

    def _start_retrying(self, started: float, stop_after: float | None) -> bool:
        """:meth:`start` until it succeeds; False when a stop came first.

        Start-up meets what a tick meets: a lock held by another clock's stalled fire transaction
        (``lock_timeout`` on PostgreSQL, ``busy_timeout`` on SQLite), a database blip. It is retried as a tick
        is, 1 s then doubling up to STARTUP_RETRY_MAX, so a clock never dies because another one stalled;
        the ledger makes a repeated start-up safe (nothing already recorded fires again).
        """
        delay = 1.0
        while not self.stop_requested.is_set():
            try:
                self.start()
                return True
            except OncebeatError as exc:
                log.warning("clock start-up failed: %s; trying again in %.0f s", exc, delay,
                            extra={"event": "clock.startup_failed"})
                self.echo(f"start-up failed ({exc}); trying again in {delay:.0f} s")
            if stop_after is not None and time.monotonic() - started >= stop_after:
                return False
            self.stop_requested.wait(delay)
            delay = min(delay * 2, STARTUP_RETRY_MAX)
        return False

    def _stop_process(self) -> None:
        log.info("clock stopped (%s): %d fire(s)", self.stop_reason, self.fires, extra={"event": "clock.stopped"})
        if self.process_id is not None:
            now = self.clock.now()
            processes.stop(self.store, self.process_id, source=self.source, now=now, detail={"fires": self.fires})
