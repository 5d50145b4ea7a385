"""What the lines tell about each job: its enqueues, runs and attempts, its fire time and its days.

The model, in the words of the stacks it reads:

- an **enqueue** is one request to run a job: an Active Job ``Enqueued`` line, or a
  clock trigger (Clockwork ``Triggering``, Celery beat ``Sending due task``, a cron
  ``CMD``) that no enqueue line follows on the same process within
  :data:`LINK_WINDOW`; a run that no logged enqueue explains gets an enqueue of
  unknown origin;
- a **run** is one job id (Active Job id, Sidekiq jid, Celery task id): its
  **attempts** start (``Performing``/``start``/``received``) and end (``Performed``/
  ``done``/``succeeded``, ``Error performing``/``fail``/``retry``/``raised``, or the
  process exiting); deliveries (``Delivered mail``) belong to the attempt that made them;
- a job's **day** is the local date, in the schedule's zone, of the enqueue behind it.

A job is **scheduled** when a clock process enqueued it (or ``--job`` names it), and
**daily** when each clock enqueues it at most once on most days (a fire on boot not
counted); only daily jobs are checked for doubled days, restarts at the fire time and the zone.
The checks on these stories are in :mod:`.analysis`.
"""

from __future__ import annotations

import statistics
import sys
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

from ...redact import redact_url
from ..model import Evidence, Finding, Timeface
from .heroku import dyno_type
from .reader import line_text
from .records import Event

__all__ = ["LINK_WINDOW", "MATCH_WINDOW", "SIDEKIQ_AJ_WINDOW", "Enqueue", "Attempt", "Run", "JobStory", "DayRow",
           "LogFinding", "Ctx", "build", "stories_of", "day_rows", "known_jobs", "clock_key", "restarts_between",
           "first_clock_per_day", "scheduled_fires", "unique_evidence", "link_sidekiq", "is_clock_event",
           "EventStore"]

LINK_WINDOW = timedelta(seconds=10)  # a trigger and the enqueue line it caused, on one process
MATCH_WINDOW = timedelta(hours=6)  # a run starts at most this long after the enqueue it is matched to by time
SIDEKIQ_AJ_WINDOW = timedelta(seconds=3)  # a Sidekiq "start" and Active Job's "Performing" of one attempt
# Heroku's router stamps a line when it receives it: a worker's start can carry an earlier stamp than the clock's
# trigger that caused it (by milliseconds in the fixtures of the real programs; this much at most)
ARRIVAL_SKEW = timedelta(seconds=2)
CLOCK_ORIGINS = {"clockwork", "beat"}


@dataclass(kw_only=True)
class Enqueue:
    """One request to run ``job``: who made it (``process``), when, and the lines that say so."""

    job: str
    at: datetime
    process: str | None  # None: no logged enqueue (the run showed up on a worker)
    clock: bool
    lines: list[Event]
    job_id: str | None = None
    origin: str = "app"  # clockwork, beat, cron, activejob, unknown
    runs: list[Run] = field(default_factory=list)


@dataclass(kw_only=True)
class Attempt:
    """One attempt of a run: its start, its end (None: no end logged), deliveries, exceptions and retries."""

    start: Event
    end: Event | None = None
    ok: bool | None = None
    mails: list[Event] = field(default_factory=list)
    errors: list[Event] = field(default_factory=list)
    retries: list[Event] = field(default_factory=list)

    @property
    def last_at(self) -> datetime:
        seen = [self.start.at] + [e.at for e in self.mails + self.errors + self.retries]
        if self.end is not None:
            seen.append(self.end.at)
        return max(seen)

    def error_text(self) -> str | None:
        for e in [self.end, *self.errors, *self.retries]:
            if e is not None and e.detail.get("error"):
                return str(e.detail["error"])
        if self.end is not None and self.end.kind == "exit":
            return f"process {self.end.process} exited ({self.end.detail.get('status')})"
        return None


@dataclass(kw_only=True)
class Run:
    """One job id and its attempts, oldest first."""

    job: str
    job_id: str
    attempts: list[Attempt] = field(default_factory=list)
    enqueue: Enqueue | None = None

    @property
    def start(self) -> datetime:
        return self.attempts[0].start.at


@dataclass(kw_only=True)
class DayRow:
    """One line of the per-day table: counts for one job on one local date of the schedule's zone."""

    job: str
    day: date
    enqueued: int
    performed: int
    failed: int
    mails: int
    enqueued_by: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "day": self.day.isoformat(), "enqueued": self.enqueued, "performed": self.performed,
                "failed": self.failed, "mails": self.mails, "enqueued_by": self.enqueued_by}


@dataclass(kw_only=True)
class JobStory:
    """Everything read about one job: enqueues, runs, its fire time and whether it is daily."""

    job: str
    aliases: set[str]
    enqueues: list[Enqueue]
    runs: list[Run]
    daily: bool
    fire_local: str | None  # the usual local time of the clock's enqueue, "08:00", in the schedule's zone
    fire_utc: str | None

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "aliases": sorted(self.aliases - {self.job}), "daily": self.daily,
                "fire_local": self.fire_local, "fire_utc": self.fire_utc, "enqueues": len(self.enqueues),
                "runs": len(self.runs), "attempts": sum(len(r.attempts) for r in self.runs),
                "mails": sum(len(a.mails) for r in self.runs for a in r.attempts)}


@dataclass(frozen=True, kw_only=True, slots=True)
class LogFinding:
    """A :class:`~oncebeat.doctor.model.Finding` with the job and local day it is about (None: not one day)."""

    finding: Finding
    job: str
    day: date | None

    def to_json(self) -> dict[str, Any]:
        return {**self.finding.to_json(), "job": self.job, "day": self.day.isoformat() if self.day else None}


def unique_evidence(evidence: Iterable[Evidence]) -> tuple[Evidence, ...]:
    """Evidence without repeating a line (one line can say two things, e.g. Celery's fail-and-retry)."""
    seen: set[tuple[Any, Any]] = set()
    out = []
    for e in evidence:
        key = (e.data.get("file"), e.data.get("line"))
        if key in seen and key != (None, None):
            continue
        seen.add(key)
        out.append(e)
    return tuple(out)


class Ctx:
    """The zone and the whole event list, shared by the checks."""

    def __init__(self, events: Sequence[Event], tz: str, clocks: set[str] | None = None) -> None:
        """``clocks``: the clock processes (:func:`is_clock_event` over every event read, noise included);
        default: computed from ``events``."""
        self.events = events
        self.tz = tz
        self.zone = ZoneInfo(tz)
        self.face = Timeface(tz)
        self.by_process: dict[str, list[Event]] = defaultdict(list)
        for e in events:
            self.by_process[e.process].append(e)
        self.clocks = clocks if clocks is not None else {e.process for e in events if is_clock_event(e)}
        # when a list: the delivery, exception and retry lines that :func:`build` tied to an attempt by process and
        # thread alone (no run of their job id had started): where lines were dropped, they tell whether that matters
        self.floating: list[Event] | None = None

    def day(self, at: datetime) -> date:
        return at.astimezone(self.zone).date()

    def evidence(self, e: Event, note: str | None = None) -> Evidence:
        # a log line may carry a URL with a password (a command line, a connection message): never show it
        raw = redact_url(line_text(e.line))
        text = f"{e.line.where}  {self.face.text(e.at)}  {e.process}: {_trim(_message(raw))}"
        if note:
            text += f"\n({note})"
        data: dict[str, Any] = {"file": e.line.file, "line": e.line.number, "at": self.face.json(e.at),
                                "process": e.process, "event": e.kind, "raw": raw}
        if e.job:
            data["job"] = e.job
        if e.job_id:
            data["job_id"] = e.job_id
        return Evidence(kind="log", text=text, data=data)


def _message(text: str) -> str:
    """The line without its Heroku/journal envelope (the instant and process are shown beside it)."""
    if text[:1].isdigit() or text[:1] == "<" or text[:3].isalpha():
        head, sep, rest = text.partition("]: ")
        if sep and len(head) < 90:
            return rest
    return text


def _trim(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_clock_event(e: Event) -> bool:
    """Whether ``e`` shows its process is a clock (a clock's trigger or boot, or a ``clock.N`` dyno)."""
    if e.kind == "trigger" and e.detail.get("origin") in CLOCK_ORIGINS:
        return True
    if e.kind == "boot" and e.detail.get("what") in ("clockwork", "beat"):
        return True
    return dyno_type(e.process) == "clock" and "[" not in e.process and " " not in e.process


class EventStore:
    """The events the analysis needs, kept as they stream in from the reader, in memory that grows with the
    job lines (enqueues, attempts, mails, errors, restarts), not with the rest of the log.

    - noise lines (web requests, router, SQL, lines of a known format that say nothing about jobs) are not kept:
      they only tell which processes are clocks (:attr:`clocks`, :func:`is_clock_event`);
    - a kept event's line loses its text when its file can give it again (:meth:`~.records.Line.stored`; the
      line of a writer's local stamp keeps it, :func:`~.analysis._host_offset` reads it);
    - names are interned, and equal job ids and details of nearby events share one object (bounded caches);
    - ``drop`` (:class:`~.scope.UnscheduledFilter`), when given, says which other events are not kept either.

    Attributes:
        events: the kept events, in input order.
        clocks: every process an event read (noise included) shows is a clock.
        names: every job name and clock alias read (for the error of a ``--job`` that matches none).
    """

    CACHE = 20_000  # entries per sharing cache; it is emptied when full (the events keep what they share)

    def __init__(self, drop: Callable[[Event], Event | None] | None = None) -> None:
        self.drop = drop
        self.events: list[Event] = []
        self.clocks: set[str] = set()
        self.names: set[str] = set()
        self._ids: dict[str, str] = {}
        self._details: dict[tuple[tuple[str, type, Any], ...], dict[str, Any]] = {}

    def add(self, e: Event) -> None:
        if e.job:
            self.names.add(e.job)
        if e.detail.get("alias"):
            self.names.add(str(e.detail["alias"]))
        if is_clock_event(e):
            self.clocks.add(e.process)
        if e.kind == "noise":
            return
        if self.drop is not None and (kept := self.drop(e)) is not e:
            if kept is None:
                return
            e = kept
        line = e.line if "local" in e.detail else e.line.stored()
        self.events.append(Event(kind=e.kind, at=e.at, line=line, process=sys.intern(e.process),
                                 job=sys.intern(e.job) if e.job else e.job, job_id=self._id(e.job_id),
                                 thread=sys.intern(e.thread) if e.thread else e.thread,
                                 host=sys.intern(e.host) if e.host else e.host, pid=e.pid,
                                 detail=self._detail(e.detail)))

    def _id(self, job_id: str | None) -> str | None:
        if job_id is None:
            return None
        if len(self._ids) >= self.CACHE:
            self._ids.clear()
        return self._ids.setdefault(job_id, job_id)

    def _detail(self, detail: dict[str, Any]) -> dict[str, Any]:
        """One shared dict for equal details of scalar values (``{"via": "sidekiq"}``); nobody mutates them."""
        if not all(v is None or isinstance(v, str | int | float) for v in detail.values()):
            return detail
        key = tuple((k, type(v), v) for k, v in detail.items())  # the type: True == 1 == 1.0 must not merge
        if len(self._details) >= self.CACHE:
            self._details.clear()
        return self._details.setdefault(key, detail)


def clock_key(process: str) -> str:
    """A clock's identity across restarts: the dyno (``clock.1``) or ``HOST IDENT`` without the pid."""
    return process.split("[", 1)[0]


# --- building enqueues, runs and attempts ---------------------------------------------------------------------

def link_sidekiq(events: list[Event]) -> list[Event]:
    """Drop Sidekiq start/done/fail lines that repeat Active Job's lines of one attempt, mapping jid → job id.

    ``events`` sorted by instant: the Active Job starts near a Sidekiq start are found by bisection (a scan of
    every start of the job on the process made this quadratic: hours for a month of a busy worker's log).
    """
    aj_jobs = {e.job for e in events if e.kind == "start" and e.detail.get("via") == "activejob"}
    aj_starts = defaultdict(list)
    for e in events:
        if e.kind == "start" and e.detail.get("via") == "activejob":
            aj_starts[(e.process, e.job)].append(e)
    jid_map: dict[str, str] = {}
    for e in events:
        if e.kind == "start" and e.detail.get("via") == "sidekiq" and e.job in aj_jobs and e.job_id:
            starts = aj_starts[(e.process, e.job)]
            near = []
            for a in islice(starts, bisect_left(starts, e.at - SIDEKIQ_AJ_WINDOW, key=_at), None):
                if a.at - e.at > SIDEKIQ_AJ_WINDOW:
                    break
                near.append(a)
            if near:
                jid_map[e.job_id] = min(near, key=lambda a: abs(a.at - e.at)).job_id or e.job_id
    out = []
    for e in events:
        if e.detail.get("via") == "sidekiq" and e.job_id in jid_map:
            if e.kind in ("start", "done", "fail"):
                continue
            e = Event(kind=e.kind, at=e.at, line=e.line, process=e.process, job=e.job, job_id=jid_map[e.job_id],
                      thread=e.thread, host=e.host, pid=e.pid, detail=e.detail)
        out.append(e)
    return out


def _at(e: Event) -> datetime:
    return e.at


def build(events: list[Event], ctx: Ctx) -> tuple[list[Enqueue], list[Run], dict[str, str]]:
    """Enqueues (with links to their runs), runs with attempts, and aliases (trigger name → job)."""
    aliases: dict[str, str] = {}
    enqueues: list[Enqueue] = []
    pending_triggers: dict[str, list[Event]] = defaultdict(list)
    enqueued_ids: set[str] = set()
    started_ids: set[str] = set()
    for e in events:
        if e.kind == "trigger":
            pending_triggers[e.process].append(e)
        elif e.kind == "start" and e.job_id:
            started_ids.add(e.job_id)
        elif e.kind == "enqueue" and e.job and (e.job_id in enqueued_ids
                                                or e.detail.get("scheduled_at") and e.job_id in started_ids):
            # Active Job's retry_on (and retry_job) enqueues the same Job ID again, from the worker, "at" a later
            # time: the run's next attempt, not a second request to run the job. Its first enqueue may be outside
            # the lines read; then the "at" says it is a retry of a run already started (a first enqueue is
            # often logged just after the worker's start of it, without "at")
            continue
        elif e.kind == "enqueue" and e.job:
            if e.job_id:
                enqueued_ids.add(e.job_id)
            linked = [t for t in pending_triggers[e.process] if timedelta(0) <= e.at - t.at <= LINK_WINDOW]
            trig = linked[0] if linked else None
            if trig is not None:
                pending_triggers[e.process].remove(trig)
                if trig.job:
                    aliases.setdefault(trig.job, e.job)
            lines = ([trig] if trig else []) + [e]
            is_clock = e.process in ctx.clocks or trig is not None and trig.detail.get("origin") in CLOCK_ORIGINS
            enqueues.append(Enqueue(job=e.job, at=(trig or e).at, process=e.process, clock=is_clock, lines=lines,
                                    job_id=e.job_id, origin=(trig.detail.get("origin") if trig else "activejob")
                                    or "activejob"))
    for proc_triggers in pending_triggers.values():
        for t in proc_triggers:
            enqueues.append(Enqueue(job=t.job or "", at=t.at, process=t.process, lines=[t],
                                    clock=t.detail.get("origin") in CLOCK_ORIGINS or t.process in ctx.clocks,
                                    origin=str(t.detail.get("origin") or "trigger")))
    for enq in enqueues:
        if enq.job in aliases:
            enq.job = aliases[enq.job]
    runs = _attempts(events, ctx.floating)
    _alias_bare_triggers(enqueues, runs, aliases)
    for enq in enqueues:
        if enq.job in aliases:
            enq.job = aliases[enq.job]
    for r in runs:
        r.job = aliases.get(r.job, r.job)
    _resolve_cron(enqueues, {r.job for r in runs} | {e.job for e in enqueues if e.job} | set(aliases))
    enqueues = [e for e in enqueues if e.job]
    enqueues.sort(key=lambda q: q.at)
    _match(enqueues, runs)
    return enqueues, runs, aliases


def _alias_bare_triggers(enqueues: list[Enqueue], runs: list[Run], aliases: dict[str, str]) -> None:
    """Name the job of clock triggers that no enqueue line follows (Clockwork with ``perform_async``: its event is
    ``dunning_digest``, the runs are ``DunningDigestWorker``): the job whose runs start, on most of the trigger's
    fires, within :data:`LINK_WINDOW` after it (or :data:`ARRIVAL_SKEW` before: stamps of arrival), with no logged
    enqueue of their own. Adds to ``aliases``."""
    named = {q.job for q in enqueues if q.lines[-1].kind == "enqueue"} | set(aliases.values())
    bare = [q for q in enqueues if q.lines[-1].kind == "trigger" and q.clock and q.job and q.job not in named
            and q.job not in aliases]
    if not bare:
        return
    starts = sorted(((r.start, r.job) for r in runs if r.job not in named and r.job not in aliases), key=lambda s: s[0])
    times = [s[0] for s in starts]
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    fires: Counter[str] = Counter()
    for q in bare:
        fires[q.job] += 1
        near: set[str] = set()
        for at, job in islice(starts, bisect_left(times, q.at - ARRIVAL_SKEW), None):
            if at - q.at > LINK_WINDOW:
                break
            near.add(job)
        for job in near:
            votes[q.job][job] += 1
    for name, counter in votes.items():
        job, n = counter.most_common(1)[0]
        if n * 2 > fires[name] and job != name:
            aliases.setdefault(name, job)


def _resolve_cron(enqueues: list[Enqueue], names: set[str]) -> None:
    """A cron command names its job somewhere in its text (a class, a task, a rake task): find which."""
    for enq in enqueues:
        if enq.job:
            continue
        command = str(enq.lines[0].detail.get("command") or "")
        hits = [n for n in names if n and n in command]
        enq.job = max(hits, key=len) if hits else ""


def _attempts(events: list[Event], floating: list[Event] | None = None) -> list[Run]:
    runs: dict[tuple[str, str], Run] = {}
    by_id: dict[str, Run] = {}
    open_by_proc: dict[str, list[Attempt]] = defaultdict(list)
    last_failed: dict[str, Attempt] = {}

    def close(att: Attempt, end: Event, ok: bool) -> None:
        att.end, att.ok = end, ok
        for lst in open_by_proc.values():
            if att in lst:
                lst.remove(att)
        if not ok:
            last_failed[end.thread or end.process] = att
            last_failed[end.process] = att

    def current(run: Run | None) -> Attempt | None:
        return run.attempts[-1] if run and run.attempts else None

    att: Attempt | None
    for e in events:
        run = by_id.get(e.job_id) if e.job_id else None
        if e.kind == "start" and e.job and e.job_id:
            run = runs.get((e.job, e.job_id)) or by_id.get(e.job_id)
            if run is None:
                run = runs[(e.job, e.job_id)] = by_id[e.job_id] = Run(job=e.job, job_id=e.job_id)
            prev = current(run)
            if prev is not None and prev.end is None:  # restarted without a logged end (killed, redelivered)
                close(prev, e, False)
            new = Attempt(start=e)
            run.attempts.append(new)
            open_by_proc[e.process].append(new)
        elif e.kind in ("fail", "retry") and (late := _late_end(run, e)) is not None:
            if e.kind == "fail":
                late.end, late.ok = e, False
            else:
                late.retries.append(e)
        elif e.kind in ("done", "fail"):
            att = current(run)
            if att is not None and att.end is None:
                close(att, e, e.kind == "done")
            elif att is not None and e.kind == "fail" and e.detail.get("error"):
                att.errors.append(e)
        elif e.kind in ("retry", "error", "mail") and floating is not None and e.detail.get("probe"):
            # a dropped job's line: only asked which kept attempt it would be tied to by process and thread
            if _by_place(e, last_failed, open_by_proc) is not None:
                floating.append(e)
        elif e.kind == "retry":
            att = current(run) or last_failed.get(e.thread or e.process)
            if att is not None:
                att.retries.append(e)
                if run is None and floating is not None:
                    floating.append(e)
        elif e.kind == "error":
            att = current(run) or _by_place(e, last_failed, open_by_proc)
            if att is not None:
                att.errors.append(e)
                if run is None and floating is not None:
                    floating.append(e)
        elif e.kind == "exit":
            # the process (or a Celery child) died: its open attempts end there, failed
            for dead in list(open_by_proc.get(e.process, [])):
                if e.thread is None or dead.start.thread in (None, e.thread):
                    close(dead, e, False)
        elif e.kind == "mail":
            att = current(run)
            if att is None:
                att = _by_place(e, last_failed, open_by_proc)
                if att is not None and floating is not None:
                    floating.append(e)
            if att is not None:
                att.mails.append(e)
    return sorted(runs.values(), key=lambda r: r.start)


def _late_end(run: Run | None, e: Event) -> Attempt | None:
    """The attempt a Celery ``retry:`` line ends when the retry's ``received`` was logged first (a retry with no
    countdown reaches the worker's main process before the pool child's line): the previous attempt, which that
    ``received`` closed without an end line, when the new one has logged nothing yet. None otherwise."""
    if run is None or len(run.attempts) < 2 or e.detail.get("via") != "celery":
        return None
    prev, cur = run.attempts[-2], run.attempts[-1]
    if prev.end is None:
        return None
    if prev.end.line == e.line:  # the retry half of the fail line just given to it
        return prev
    if prev.end.kind != "start" or cur.end is not None or cur.mails or cur.errors:
        return None
    threads = {m.thread for m in prev.mails if m.thread}
    return prev if not threads or e.thread in threads else None


def _by_place(e: Event, last_failed: dict[str, Attempt], open_by_proc: dict[str, list[Attempt]]) -> Attempt | None:
    """The attempt a line that no run of its job id claims is tied to: by its process and thread."""
    if e.kind == "retry":
        return last_failed.get(e.thread or e.process)
    if e.kind == "error":
        att = last_failed.get(e.thread or "") or last_failed.get(e.process)
        if att is None and open_by_proc.get(e.process):
            att = open_by_proc[e.process][-1]
        return att
    return _open_for(open_by_proc, e)


def _open_for(open_by_proc: dict[str, list[Attempt]], e: Event) -> Attempt | None:
    candidates = open_by_proc.get(e.process, [])
    if e.thread:
        same = [a for a in candidates if a.start.thread == e.thread]
        candidates = same or candidates
    return candidates[-1] if candidates else None


def _match(enqueues: list[Enqueue], runs: list[Run]) -> None:
    """Tie each run to its enqueue: by job id, else the oldest unmatched enqueue of the job before it."""
    by_id = {e.job_id: e for e in enqueues if e.job_id}
    waiting: dict[str, list[Enqueue]] = defaultdict(list)
    for e in enqueues:
        if not e.job_id:
            waiting[e.job].append(e)
    for run in runs:
        enq = by_id.get(run.job_id)
        if enq is None:
            queue = waiting.get(run.job, [])
            fit = [q for q in queue if q.at <= run.start + LINK_WINDOW and run.start - q.at <= MATCH_WINDOW]
            if fit:
                enq = fit[0]
                queue.remove(enq)
        if enq is None:
            enq = Enqueue(job=run.job, at=run.start, process=None, clock=False, lines=[run.attempts[0].start],
                          origin="unknown")
            enqueues.append(enq)
        run.enqueue = enq
        enq.runs.append(run)
    enqueues.sort(key=lambda q: q.at)


# --- the stories of jobs ------------------------------------------------------------------------------------

def stories_of(enqueues: list[Enqueue], runs: list[Run], aliases: dict[str, str], ctx: Ctx,
             job: str | None) -> list[JobStory]:
    names = sorted({e.job for e in enqueues if e.clock})
    if job:
        wanted = _canonical(job, aliases)
        names = [wanted] if any(e.job == wanted for e in enqueues) or any(r.job == wanted for r in runs) else []
    stories = []
    for name in names:
        qs = [e for e in enqueues if e.job == name]
        rs = [r for r in runs if r.job == name]
        per_day_clock: Counter[tuple[date, str]] = Counter(
            (ctx.day(e.at), clock_key(e.process or "")) for e in scheduled_fires(qs, ctx))
        if not per_day_clock:  # named with --job but no clock enqueues it (any more): judge by all enqueues
            per_day_clock = Counter((ctx.day(e.at), "") for e in qs)
        daily = bool(per_day_clock) and statistics.median(per_day_clock.values()) <= 1
        fire_local = fire_utc = None
        firsts = first_clock_per_day(qs, ctx)
        if firsts:
            fire_local = Counter(e.at.astimezone(ctx.zone).strftime("%H:%M") for e in firsts).most_common(1)[0][0]
            fire_utc = Counter(e.at.astimezone(UTC).strftime("%H:%M") for e in firsts).most_common(1)[0][0]
        stories.append(JobStory(job=name, aliases={a for a, j in aliases.items() if j == name} | {name},
                                enqueues=qs, runs=rs, daily=daily, fire_local=fire_local, fire_utc=fire_utc))
    return stories


def scheduled_fires(qs: list[Enqueue], ctx: Ctx) -> list[Enqueue]:
    """The clock enqueues that were not a fire on boot (a restart of that clock since its previous enqueue)."""
    out: list[Enqueue] = []
    last: dict[str, Enqueue] = {}
    for q in qs:
        if not q.clock:
            continue
        key = clock_key(q.process or "")
        prev = last.get(key)
        last[key] = q
        if prev is not None and ctx.day(prev.at) == ctx.day(q.at):
            host = q.lines[-1].host if q.lines else None
            if restarts_between(ctx, key, host, prev.at, q.at):
                continue
        out.append(q)
    return out


def _canonical(job: str, aliases: dict[str, str]) -> str:
    return aliases.get(job, job)


def first_clock_per_day(qs: Iterable[Enqueue], ctx: Ctx) -> list[Enqueue]:
    firsts: dict[date, Enqueue] = {}
    for e in qs:
        if e.clock:
            firsts.setdefault(ctx.day(e.at), e)
    return list(firsts.values())


def day_rows(story: JobStory, ctx: Ctx) -> list[DayRow]:
    """The per-day table of one job."""
    days: dict[date, DayRow] = {}

    def row(d: date) -> DayRow:
        if d not in days:
            days[d] = DayRow(job=story.job, day=d, enqueued=0, performed=0, failed=0, mails=0, enqueued_by=[])
        return days[d]

    for q in story.enqueues:
        r = row(ctx.day(q.at))
        r.enqueued += 1
        r.enqueued_by.append(q.process or "?")
        for run in q.runs:
            for a in run.attempts:
                r.performed += 1
                r.failed += a.ok is False
                r.mails += len(a.mails)
    return [days[d] for d in sorted(days)]


def restarts_between(ctx: Ctx, key: str, host: str | None, a: datetime, b: datetime) -> list[Event]:
    found = []
    for proc, evs in ctx.by_process.items():
        mine = clock_key(proc) == key and proc in ctx.clocks  # not a worker that shares the host and ident
        unit = host is not None and proc.startswith(f"{host} ") and any(w in proc for w in ("beat", "clock"))
        if not (mine or unit):
            continue
        found += [e for e in evs if e.kind in ("restart", "boot", "exit") and a < e.at <= b]
    return sorted(found, key=lambda e: e.at)


def known_jobs(events: Sequence[Event]) -> list[str]:
    """Every job name the events mention (for the error of a ``--job`` that matches none)."""
    return sorted({e.job for e in events if e.job} | {str(e.detail["alias"]) for e in events if e.detail.get("alias")})
