"""From events to what happened: enqueues, runs and attempts of each job, and the findings.

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
**daily** when each clock enqueues it at most once on most days; only daily jobs
are checked for doubled days, restarts at the fire time and the zone.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

from ..model import Evidence, Finding, Timeface
from .heroku import dyno_type
from .journald import offset_text
from .records import Event

__all__ = ["Enqueue", "Attempt", "Run", "JobStory", "DayRow", "LogFinding", "analyse", "LINK_WINDOW",
           "FIRE_WINDOW"]

LINK_WINDOW = timedelta(seconds=10)  # a trigger and the enqueue line it caused, on one process
MATCH_WINDOW = timedelta(hours=6)  # a run starts at most this long after the enqueue it is matched to by time
FIRE_WINDOW = timedelta(minutes=15)  # a restart or deploy this close to the fire instant is "at the fire time"
SIDEKIQ_AJ_WINDOW = timedelta(seconds=3)  # a Sidekiq "start" and Active Job's "Performing" of one attempt
ONEOFF_TYPES = {"scheduler": "a Heroku Scheduler job (one-off dyno {p})", "run": "a one-off dyno {p} (heroku run)",
                "cron": "a cron entry ({p})"}
_CLOCK_ORIGINS = {"clockwork", "beat"}


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


def _unique(evidence: Iterable[Evidence]) -> tuple[Evidence, ...]:
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


class _Ctx:
    """The zone and the whole event list, shared by the checks."""

    def __init__(self, events: Sequence[Event], tz: str) -> None:
        self.events = events
        self.tz = tz
        self.zone = ZoneInfo(tz)
        self.face = Timeface(tz)
        self.by_process: dict[str, list[Event]] = defaultdict(list)
        for e in events:
            self.by_process[e.process].append(e)
        self.clocks = {e.process for e in events if _is_clock_event(e)}

    def day(self, at: datetime) -> date:
        return at.astimezone(self.zone).date()

    def evidence(self, e: Event, note: str | None = None) -> Evidence:
        text = f"{e.line.where}  {self.face.text(e.at)}  {e.process}: {_trim(_message(e.line.text))}"
        if note:
            text += f"\n({note})"
        data: dict[str, Any] = {"file": e.line.file, "line": e.line.number, "at": self.face.json(e.at),
                                "process": e.process, "event": e.kind, "text": e.line.text}
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


def _is_clock_event(e: Event) -> bool:
    if e.kind == "trigger" and e.detail.get("origin") in _CLOCK_ORIGINS:
        return True
    if e.kind == "boot" and e.detail.get("what") in ("clockwork", "beat"):
        return True
    return dyno_type(e.process) == "clock" and "[" not in e.process and " " not in e.process


def clock_key(process: str) -> str:
    """A clock's identity across restarts: the dyno (``clock.1``) or ``HOST IDENT`` without the pid."""
    return process.split("[", 1)[0]


# --- building enqueues, runs and attempts ---------------------------------------------------------------------

def _link_sidekiq(events: list[Event]) -> list[Event]:
    """Drop Sidekiq start/done/fail lines that repeat Active Job's lines of one attempt, mapping jid → job id."""
    aj_jobs = {e.job for e in events if e.kind == "start" and e.detail.get("via") == "activejob"}
    aj_starts = defaultdict(list)
    for e in events:
        if e.kind == "start" and e.detail.get("via") == "activejob":
            aj_starts[(e.process, e.job)].append(e)
    jid_map: dict[str, str] = {}
    for e in events:
        if e.kind == "start" and e.detail.get("via") == "sidekiq" and e.job in aj_jobs and e.job_id:
            near = [a for a in aj_starts[(e.process, e.job)] if abs(a.at - e.at) <= SIDEKIQ_AJ_WINDOW]
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


def _build(events: list[Event], ctx: _Ctx) -> tuple[list[Enqueue], list[Run], dict[str, str]]:
    """Enqueues (with links to their runs), runs with attempts, and aliases (trigger name → job)."""
    aliases: dict[str, str] = {}
    enqueues: list[Enqueue] = []
    pending_triggers: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.kind == "trigger":
            pending_triggers[e.process].append(e)
        elif e.kind == "enqueue" and e.job:
            linked = [t for t in pending_triggers[e.process] if timedelta(0) <= e.at - t.at <= LINK_WINDOW]
            trig = linked[0] if linked else None
            if trig is not None:
                pending_triggers[e.process].remove(trig)
                if trig.job:
                    aliases.setdefault(trig.job, e.job)
            lines = ([trig] if trig else []) + [e]
            is_clock = e.process in ctx.clocks or trig is not None and trig.detail.get("origin") in _CLOCK_ORIGINS
            enqueues.append(Enqueue(job=e.job, at=(trig or e).at, process=e.process, clock=is_clock, lines=lines,
                                    job_id=e.job_id, origin=(trig.detail.get("origin") if trig else "activejob")
                                    or "activejob"))
    for proc_triggers in pending_triggers.values():
        for t in proc_triggers:
            enqueues.append(Enqueue(job=t.job or "", at=t.at, process=t.process, lines=[t],
                                    clock=t.detail.get("origin") in _CLOCK_ORIGINS or t.process in ctx.clocks,
                                    origin=str(t.detail.get("origin") or "trigger")))
    for enq in enqueues:
        if enq.job in aliases:
            enq.job = aliases[enq.job]
    runs = _attempts(events)
    for r in runs:
        r.job = aliases.get(r.job, r.job)
    _resolve_cron(enqueues, {r.job for r in runs} | {e.job for e in enqueues if e.job} | set(aliases))
    enqueues = [e for e in enqueues if e.job]
    enqueues.sort(key=lambda q: q.at)
    _match(enqueues, runs)
    return enqueues, runs, aliases


def _resolve_cron(enqueues: list[Enqueue], names: set[str]) -> None:
    """A cron command names its job somewhere in its text (a class, a task, a rake task): find which."""
    for enq in enqueues:
        if enq.job:
            continue
        command = str(enq.lines[0].detail.get("command") or "")
        hits = [n for n in names if n and n in command]
        enq.job = max(hits, key=len) if hits else ""


def _attempts(events: list[Event]) -> list[Run]:
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
        elif e.kind in ("done", "fail"):
            att = current(run)
            if att is not None and att.end is None:
                close(att, e, e.kind == "done")
            elif att is not None and e.kind == "fail" and e.detail.get("error"):
                att.errors.append(e)
        elif e.kind == "retry":
            att = current(run) or last_failed.get(e.thread or e.process)
            if att is not None:
                att.retries.append(e)
        elif e.kind == "error":
            att = current(run) or last_failed.get(e.thread or "") or last_failed.get(e.process)
            if att is None and open_by_proc.get(e.process):
                att = open_by_proc[e.process][-1]
            if att is not None:
                att.errors.append(e)
        elif e.kind == "exit":
            # the process (or a Celery child) died: its open attempts end there, failed
            for dead in list(open_by_proc.get(e.process, [])):
                if e.thread is None or dead.start.thread in (None, e.thread):
                    close(dead, e, False)
        elif e.kind == "mail":
            att = current(run)
            if att is None:
                att = _open_for(open_by_proc, e)
            if att is not None:
                att.mails.append(e)
    return sorted(runs.values(), key=lambda r: r.start)


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

def _stories(enqueues: list[Enqueue], runs: list[Run], aliases: dict[str, str], ctx: _Ctx,
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
            (ctx.day(e.at), clock_key(e.process or "")) for e in _scheduled_fires(qs, ctx))
        daily = bool(per_day_clock) and statistics.median(per_day_clock.values()) <= 1
        fire_local = fire_utc = None
        firsts = _first_clock_per_day(qs, ctx)
        if firsts:
            fire_local = Counter(e.at.astimezone(ctx.zone).strftime("%H:%M") for e in firsts).most_common(1)[0][0]
            fire_utc = Counter(e.at.astimezone(UTC).strftime("%H:%M") for e in firsts).most_common(1)[0][0]
        stories.append(JobStory(job=name, aliases={a for a, j in aliases.items() if j == name} | {name},
                                enqueues=qs, runs=rs, daily=daily, fire_local=fire_local, fire_utc=fire_utc))
    return stories


def _scheduled_fires(qs: list[Enqueue], ctx: _Ctx) -> list[Enqueue]:
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
            if _restarts_between(ctx, key, host, prev.at, q.at):
                continue
        out.append(q)
    return out


def _canonical(job: str, aliases: dict[str, str]) -> str:
    return aliases.get(job, job)


def _first_clock_per_day(qs: Iterable[Enqueue], ctx: _Ctx) -> list[Enqueue]:
    firsts: dict[date, Enqueue] = {}
    for e in qs:
        if e.clock:
            firsts.setdefault(ctx.day(e.at), e)
    return list(firsts.values())


def day_rows(story: JobStory, ctx: _Ctx) -> list[DayRow]:
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


# --- checks --------------------------------------------------------------------------------------------------

def _enqueue_evidence(ctx: _Ctx, q: Enqueue, note: str | None = None) -> list[Evidence]:
    if not q.lines:
        return []
    ev = [ctx.evidence(line) for line in q.lines]
    if note:
        ev[-1] = ctx.evidence(q.lines[-1], note)
    return ev


def _who(q: Enqueue) -> str:
    if q.process is None:
        return "no logged enqueue (the run appeared on a worker: a console, `celery call`, another app)"
    kind = "cron" if q.origin == "cron" else dyno_type(q.process)
    if kind in ONEOFF_TYPES:
        return ONEOFF_TYPES[kind].format(p=q.process)
    return q.process


def _restarts_between(ctx: _Ctx, key: str, host: str | None, a: datetime, b: datetime) -> list[Event]:
    found = []
    for proc, evs in ctx.by_process.items():
        mine = clock_key(proc) == key and proc in ctx.clocks  # not a worker that shares the host and ident
        unit = host is not None and proc.startswith(f"{host} ") and any(w in proc for w in ("beat", "clock"))
        if not (mine or unit):
            continue
        found += [e for e in evs if e.kind in ("restart", "boot", "exit") and a < e.at <= b]
    return sorted(found, key=lambda e: e.at)


def _deploys_near(ctx: _Ctx, at: datetime) -> list[Event]:
    return [e for e in ctx.events if e.kind == "deploy" and abs(e.at - at) <= FIRE_WINDOW]


FIX_CLOCKS = ("Run exactly one clock (`heroku ps:scale clock=1`; one `celery beat` per deployment). A clock that is "
              "alone by convention is one deploy away from two: oncebeat's clocks record each occurrence under a "
              "unique constraint, so any number of them enqueue one job per day (G1).")
FIX_RESTART = ("A clock must not fire because it started: remember the last fire where a restart cannot lose it "
               "(the database, not the process's memory) and skip a day already served. oncebeat's clock consults "
               "its occurrence ledger on boot and applies an explicit catch-up policy instead (G2).")
FIX_LEFTOVER = ("Remove the old trigger: delete the job in Heroku Scheduler (`heroku addons:open scheduler`), the cron "
                "entry, or the code path that enqueues it, and run this doctor again to confirm it is gone. While "
                "two triggers overlap, only an idempotent job (oncebeat's reminder rows and effect keys) is safe.")
FIX_DOUBLE = ("Find what enqueued it twice (the lines above); then make the job idempotent per business day: oncebeat "
              "records one occurrence per fire instant and one reminder per invoice and stage (G1, G5).")
FIX_RETRY = ("A retry re-runs the whole job, so every mail delivered before the failure goes out again. Record each "
             "delivery before the retry can select it again, or retry per invoice; oncebeat runs each mail inside "
             "effect(key), so a retried or rescued job never resends (G4).")
FIX_CONCURRENT = ("Two runs that overlap both select the not-yet-reminded invoices before either marks them. A lock "
                  "or unique-job plugin only narrows the window; create one reminder row per (invoice, stage) with a "
                  "unique constraint before sending, as oncebeat does (G5), and send each inside effect(key) (G4).")
FIX_TZ = ("Compute the business date in the schedule's zone (`Time.now.in_time_zone('{tz}').to_date`, "
          "`datetime.now(ZoneInfo('{tz}')).date()`), never the host's `Date.today`; or set TZ={tz} on the clock. "
          "oncebeat derives the date from the occurrence in the schedule's zone (G7).")
FIX_UTC = ("Give the schedule its zone (Clockwork `tz: '{tz}'`, Celery `timezone = '{tz}'` with `enable_utc`), or "
           "move it to oncebeat, where every schedule has an IANA zone and DST follows a documented rule (G7).")
FIX_FIRE_RESTART = ("Deploy or restart the clock away from the fire time, and make the clock catch up from a record "
                    "of what fired (oncebeat's occurrence ledger and catch-up policy, G2) rather than its memory.")


def _check_days(story: JobStory, ctx: _Ctx) -> list[LogFinding]:
    out: list[LogFinding] = []
    by_day: dict[date, list[Enqueue]] = defaultdict(list)
    for q in story.enqueues:
        by_day[ctx.day(q.at)].append(q)
    has_clock = any(q.clock for q in story.enqueues)
    for day, qs in sorted(by_day.items()):
        if len(qs) < 2 and not (has_clock and any(not q.clock for q in qs)):
            continue
        doubled = len(qs) >= 2
        clocks: dict[str, list[Enqueue]] = defaultdict(list)
        for q in qs:
            if q.clock:
                clocks[clock_key(q.process or "")].append(q)
        if len(clocks) >= 2 and story.daily:
            out.append(_multiple_clocks(story, ctx, day, clocks))
        for key, cqs in clocks.items():
            for first, again in pairwise(cqs):
                out.append(_same_clock_twice(story, ctx, day, key, first, again))
        for q in qs:
            if not q.clock:
                out.append(_leftover(story, ctx, day, q, qs, doubled))
    return out


def _multiple_clocks(story: JobStory, ctx: _Ctx, day: date, clocks: dict[str, list[Enqueue]]) -> LogFinding:
    firsts = [c[0] for c in clocks.values()]
    ev: list[Evidence] = []
    for q in firsts:
        ev += _enqueue_evidence(ctx, q)
    scale = [e for e in ctx.events if e.kind == "scale" and e.at <= firsts[-1].at
             and e.detail.get("formation", {}).get("clock", 0) >= 2]
    if scale:
        ev.append(ctx.evidence(scale[-1], "the formation asked for more than one clock dyno"))
    names = ", ".join(f"{q.process} at {q.at.astimezone(ctx.zone).strftime('%H:%M:%S')}" for q in firsts)
    f = Finding(code="multiple-clocks", severity="error", subject=f"job:{story.job}",
                summary=f"{story.job} was enqueued on {day} by {len(clocks)} clock processes alive at once: {names}",
                fix=FIX_CLOCKS, evidence=_unique(ev))
    return LogFinding(finding=f, job=story.job, day=day)


def _same_clock_twice(story: JobStory, ctx: _Ctx, day: date, key: str, first: Enqueue, again: Enqueue) -> LogFinding:
    host = again.lines[-1].host if again.lines else None
    restarts = _restarts_between(ctx, key, host, first.at, again.at)
    hm = again.at.astimezone(ctx.zone).strftime("%H:%M:%S")
    if restarts:
        deploys = _deploys_near(ctx, restarts[0].at)
        ev = _enqueue_evidence(ctx, first, "the day's fire")
        ev += [ctx.evidence(d, "a deploy restarts every dyno") for d in deploys[:1]]
        shown = restarts[:3] + ([restarts[-1]] if len(restarts) > 3 else [])
        ev += [ctx.evidence(r) for r in shown]
        ev += _enqueue_evidence(ctx, again, "fired again on boot")
        after = duration_since(first.at, restarts[0].at)
        cause = "a deploy restarted" if deploys else "the platform restarted"
        f = Finding(code="clock-restart", severity="error", subject=f"job:{story.job}",
                    summary=f"{story.job} was enqueued twice on {day} by {key}: {cause} the clock {after} after the "
                            f"day's fire and it fired again on boot at {hm}",
                    fix=FIX_RESTART, evidence=_unique(ev))
        return LogFinding(finding=f, job=story.job, day=day)
    if first.process != again.process:
        f = Finding(code="multiple-clocks", severity="error", subject=f"job:{story.job}",
                    summary=f"{story.job} was enqueued on {day} by two clock processes of {key}: {first.process} and "
                            f"{again.process} (at {hm}), with no restart between them",
                    fix=FIX_CLOCKS, evidence=tuple(_enqueue_evidence(ctx, first) + _enqueue_evidence(ctx, again)))
        return LogFinding(finding=f, job=story.job, day=day)
    f = Finding(code="double-enqueue", severity="error", subject=f"job:{story.job}",
                summary=f"{story.job} was enqueued twice on {day} by the same clock process {first.process} "
                        f"(again at {hm}) with no restart logged between",
                fix=FIX_DOUBLE, evidence=tuple(_enqueue_evidence(ctx, first) + _enqueue_evidence(ctx, again)))
    return LogFinding(finding=f, job=story.job, day=day)


def duration_since(a: datetime, b: datetime) -> str:
    from ..model import duration_text
    return duration_text((b - a).total_seconds())


def _leftover(story: JobStory, ctx: _Ctx, day: date, q: Enqueue, qs: list[Enqueue], doubled: bool) -> LogFinding:
    who = _who(q)
    ev = [ev for other in qs if other is not q and other.clock for ev in _enqueue_evidence(ctx, other)][:2]
    boots = [e for e in ctx.by_process.get(q.process or "", []) if e.kind == "boot" and e.detail.get("command")]
    ev += [ctx.evidence(b) for b in boots[:1]]
    ev += _enqueue_evidence(ctx, q, "besides the clock" if doubled else None)
    if q.process is None and q.runs:
        ev.append(ctx.evidence(q.runs[0].attempts[0].start, "a run no logged enqueue explains"))
    hm = q.at.astimezone(ctx.zone).strftime("%H:%M:%S")
    if doubled:
        summary = f"{story.job} was enqueued on {day} at {hm} by {who}, besides the clock ({len(qs)} enqueues that day)"
    else:
        summary = f"{story.job} was enqueued on {day} at {hm} by {who}, not by the clock that schedules it"
    f = Finding(code="leftover-trigger", severity="error" if doubled else "warning", subject=f"job:{story.job}",
                summary=summary, fix=FIX_LEFTOVER, evidence=_unique(ev))
    return LogFinding(finding=f, job=story.job, day=day)


def _check_retries(story: JobStory, ctx: _Ctx) -> list[LogFinding]:
    out = []
    for run in story.runs:
        failed = [(i, a) for i, a in enumerate(run.attempts) if a.ok is False and a.mails and i + 1 < len(run.attempts)]
        if not failed:
            continue
        ev: list[Evidence] = []
        parts = []
        for i, a in failed:
            retry = run.attempts[i + 1]
            ev.append(ctx.evidence(a.start, f"attempt {i + 1} on {a.start.process}"))
            ev.append(ctx.evidence(a.mails[0], f"{len(a.mails)} mail(s) delivered in this attempt, first"))
            if len(a.mails) > 1:
                ev.append(ctx.evidence(a.mails[-1], "last mail before the failure"))
            if a.end is not None:
                ev.append(ctx.evidence(a.end))
            ev += [ctx.evidence(x) for x in sorted(a.errors + a.retries, key=lambda x: x.line.number)[:3]]
            ev.append(ctx.evidence(retry.start, f"attempt {i + 2}: the retry"))
            if retry.mails:
                ev.append(ctx.evidence(retry.mails[0], f"{len(retry.mails)} mail(s) delivered again by the retry"))
            parts.append(f"attempt {i + 1} delivered {len(a.mails)} mail(s) then failed "
                         f"({a.error_text() or 'no exception logged'}); attempt {i + 2} ran them again "
                         f"({len(retry.mails)} mail(s))")
        day = ctx.day(run.enqueue.at if run.enqueue else run.start)
        f = Finding(code="retry-side-effect", severity="error", subject=f"job:{story.job}/{run.job_id}",
                    summary=f"{story.job} {run.job_id} on {day}: " + "; ".join(parts), fix=FIX_RETRY,
                    evidence=_unique(ev))
        out.append(LogFinding(finding=f, job=story.job, day=day))
    return out


def _check_concurrent(story: JobStory, ctx: _Ctx) -> list[LogFinding]:
    out = []
    spans = [(a.start.at, a.last_at, run, a) for run in story.runs for a in run.attempts]
    spans.sort(key=lambda s: s[0])
    seen_days: set[date] = set()
    for i, (s1, e1, r1, a1) in enumerate(spans):
        for s2, e2, r2, a2 in spans[i + 1:]:
            if s2 >= e1:
                break
            if r1 is r2:
                continue
            day = ctx.day(r1.enqueue.at if r1.enqueue else s1)
            if day in seen_days:
                continue
            seen_days.add(day)
            ev = [ctx.evidence(a1.start, f"run {r1.job_id} starts on {a1.start.process}"),
                  ctx.evidence(a2.start, f"run {r2.job_id} starts on {a2.start.process} before the first ended")]
            for a in (a1, a2):
                if a.mails:
                    ev.append(ctx.evidence(a.mails[0], f"{len(a.mails)} mail(s) delivered by this run"))
                if a.end is not None:
                    ev.append(ctx.evidence(a.end))
            f = Finding(code="concurrent-run", severity="error", subject=f"job:{story.job}",
                        summary=f"{story.job} ran twice at once on {day}: {r1.job_id} on {a1.start.process} "
                                f"({_hms(ctx, s1)}–{_hms(ctx, e1)}) and {r2.job_id} on {a2.start.process} "
                                f"({_hms(ctx, s2)}–{_hms(ctx, e2)})",
                        fix=FIX_CONCURRENT, evidence=_unique(ev))
            out.append(LogFinding(finding=f, job=story.job, day=day))
    return out


def _hms(ctx: _Ctx, at: datetime) -> str:
    return at.astimezone(ctx.zone).strftime("%H:%M:%S")


def _host_offset(e: Event) -> timedelta | None:
    """The writer's UTC offset from the line itself: journalctl's offset, or its local stamp next to the UTC one."""
    if isinstance(e.detail.get("offset"), timedelta):
        return e.detail["offset"]  # type: ignore[no-any-return]
    local = e.detail.get("local")
    if isinstance(local, datetime) and e.line.text[:4].isdigit() and "T" in e.line.text[:20]:
        raw = (local - e.at.astimezone(UTC).replace(tzinfo=None)).total_seconds()
        return timedelta(minutes=round(raw / 900) * 15)
    return None


def _check_timezone(story: JobStory, ctx: _Ctx) -> list[LogFinding]:
    out: list[LogFinding] = []
    if not story.daily:
        return out
    # 1. the clock's own date differs from the schedule's date at the fire (host TZ evidence)
    wrong: dict[str, list[tuple[Enqueue, Event, timedelta]]] = defaultdict(list)
    for q in story.enqueues:
        if not q.clock:
            continue
        for line in q.lines:
            off = _host_offset(line)
            if off is None:
                continue
            host_day = (line.at.astimezone(UTC) + off).date()
            if host_day != ctx.day(line.at):
                wrong[clock_key(q.process or "")].append((q, line, off))
            break
    for key, items in wrong.items():
        q, line, off = items[0]
        host_day = (line.at.astimezone(UTC) + off).date()
        ev = [ctx.evidence(line, f"the process writes its own time as UTC{offset_text(off)}: its date is {host_day}, "
                                 f"the schedule's date is {ctx.day(line.at)} in {ctx.tz}")]
        ev += [ctx.evidence(x[1]) for x in items[1:3]]
        f = Finding(code="timezone", severity="warning", subject=f"process:{key}",
                    summary=f"{key} runs at UTC{offset_text(off)}: when it fires {story.job} its local date differs "
                            f"from the schedule's date in {ctx.tz} on {len(items)} day(s), so a job that uses the "
                            f"host's today (Date.today, date.today()) picks the wrong day's invoices",
                    fix=FIX_TZ.format(tz=ctx.tz), evidence=_unique(ev))
        out.append(LogFinding(finding=f, job=story.job, day=None))
    # 2. a fixed UTC time across a DST change of the schedule's zone: the schedule runs in UTC
    firsts = _first_clock_per_day(story.enqueues, ctx)
    if len(firsts) >= 4:
        offsets = {q.at.astimezone(ctx.zone).utcoffset() for q in firsts}
        utc_times = Counter(q.at.astimezone(UTC).strftime("%H:%M") for q in firsts)
        local_times = Counter(q.at.astimezone(ctx.zone).strftime("%H:%M") for q in firsts)
        utc_mode, n_utc = utc_times.most_common(1)[0]
        if len(offsets) > 1 and n_utc >= 0.9 * len(firsts) and len(local_times) > 1 and \
                local_times.most_common(1)[0][1] < n_utc:
            before = next(q for q in firsts if q.at.astimezone(UTC).strftime("%H:%M") == utc_mode)
            after = next(q for q in firsts if q.at.astimezone(ctx.zone).utcoffset() != before.at.astimezone(ctx.zone)
                         .utcoffset() and q.at.astimezone(UTC).strftime("%H:%M") == utc_mode)
            lt = sorted(local_times)
            ev = [ctx.evidence(before.lines[-1], f"fires at {utc_mode} UTC = "
                                                 f"{before.at.astimezone(ctx.zone).strftime('%H:%M %Z')}"),
                  ctx.evidence(after.lines[-1], f"still {utc_mode} UTC after the DST change = "
                                                f"{after.at.astimezone(ctx.zone).strftime('%H:%M %Z')}")]
            f = Finding(code="timezone", severity="warning", subject=f"job:{story.job}",
                        summary=f"{story.job} fires at {utc_mode} UTC every day, so in {ctx.tz} it moves with DST "
                                f"({' and '.join(lt)}): the schedule is kept in UTC, not in {ctx.tz}",
                        fix=FIX_UTC.format(tz=ctx.tz), evidence=_unique(ev))
            out.append(LogFinding(finding=f, job=story.job, day=None))
    return out


def _check_fire_time(story: JobStory, ctx: _Ctx, explained: set[date]) -> list[LogFinding]:
    """Restarts and deploys of a clock at the fire time on days not already explained by a double enqueue."""
    out: list[LogFinding] = []
    if not story.daily or story.fire_local is None:
        return out
    hh, mm = (int(x) for x in story.fire_local.split(":"))
    clock_keys = {clock_key(q.process or "") for q in story.enqueues if q.clock}
    counts = Counter(ctx.day(q.at) for q in story.enqueues)
    near: dict[date, list[Event]] = defaultdict(list)
    for e in ctx.events:
        if e.kind == "deploy" or (e.kind in ("restart", "exit") and e.process in ctx.clocks
                                  and clock_key(e.process) in clock_keys):
            day = ctx.day(e.at)
            fire = datetime(day.year, day.month, day.day, hh, mm, tzinfo=ctx.zone)
            if abs(e.at - fire) <= FIRE_WINDOW:
                near[day].append(e)
    first_day = min(counts) if counts else None
    last_day = max(counts) if counts else None
    for day, evs in sorted(near.items()):
        if day in explained:
            continue
        n = counts.get(day, 0)
        inside = first_day is not None and last_day is not None and first_day <= day <= last_day
        if n == 1 and not inside:
            continue
        what = "a deploy" if any(e.kind == "deploy" for e in evs) else f"a restart of {evs[0].process}"
        if n == 0:
            summary = f"{what} at the fire time ({story.fire_local}) on {day}, and {story.job} was not enqueued that day"
            code, severity = "lost", "error"
        else:
            summary = f"{what} at the fire time ({story.fire_local}) on {day}: {story.job} was enqueued {n} time(s); " \
                      "a restart at that moment can skip or repeat the day"
            code, severity = "clock-restart", "warning"
        f = Finding(code=code, severity=severity, subject=f"job:{story.job}", summary=summary, fix=FIX_FIRE_RESTART,
                    evidence=tuple(ctx.evidence(e) for e in evs[:4]))
        out.append(LogFinding(finding=f, job=story.job, day=day))
    return out


def analyse(events: list[Event], *, tz: str, job: str | None = None) -> tuple[list[JobStory], list[LogFinding],
                                                                                  list[DayRow], dict[str, str]]:
    """Build the jobs' stories from ``events`` and run every check.

    Args:
        events: parsed events, any order (sorted here by instant, then file and line).
        tz: the schedule's IANA zone: days, fire times and evidence are shown in it.
        job: only this job (class, task, or the clock's name for it).
    Returns:
        ``(stories, findings, per-day rows, aliases)``.
    """
    events = sorted(events, key=lambda e: (e.at, e.line.file, e.line.number))
    events = _link_sidekiq(events)
    ctx = _Ctx(events, tz)
    enqueues, runs, aliases = _build(events, ctx)
    stories = _stories(enqueues, runs, aliases, ctx, job)
    findings: list[LogFinding] = []
    rows: list[DayRow] = []
    for story in stories:
        day_findings = _check_days(story, ctx) if story.daily else []
        explained = {f.day for f in day_findings if f.day is not None and f.finding.code == "clock-restart"}
        findings += day_findings
        findings += _check_retries(story, ctx)
        findings += _check_concurrent(story, ctx)
        findings += _check_timezone(story, ctx)
        findings += _check_fire_time(story, ctx, explained)
        rows += day_rows(story, ctx)
    return stories, findings, rows, aliases


def known_jobs(events: Sequence[Event]) -> list[str]:
    """Every job name the events mention (for the error of a ``--job`` that matches none)."""
    return sorted({e.job for e in events if e.job} | {str(e.detail["alias"]) for e in events if e.detail.get("alias")})
