"""The log doctor's checks: from the stories of :mod:`.story` to findings with evidence and a fix.

Each check reads the jobs' enqueues, runs and attempts and returns :class:`~.story.LogFinding`
values (the doctor's :class:`~oncebeat.doctor.model.Finding` plus the job and its day);
:func:`analyse` runs them all. What each finds is in ``docs/doctor-logs.md``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

from ..model import Evidence, Finding, duration_text
from .heroku import dyno_type
from .journald import offset_text
from .records import Event
from .story import (
    Ctx,
    DayRow,
    Enqueue,
    JobStory,
    LogFinding,
    build,
    clock_key,
    day_rows,
    first_clock_per_day,
    known_jobs,
    link_sidekiq,
    restarts_between,
    stories_of,
    unique_evidence,
)

__all__ = ["FIRE_WINDOW", "ONEOFF_TYPES", "analyse", "known_jobs"]

FIRE_WINDOW = timedelta(minutes=15)  # a restart or deploy this close to the fire instant is "at the fire time"
ONEOFF_TYPES = {"scheduler": "a Heroku Scheduler job (one-off dyno {p})", "run": "a one-off dyno {p} (heroku run)",
                "cron": "a cron entry ({p})"}

# --- checks --------------------------------------------------------------------------------------------------

def _enqueue_evidence(ctx: Ctx, q: Enqueue, note: str | None = None) -> list[Evidence]:
    if not q.lines:
        return []
    ev = [ctx.evidence(line) for line in q.lines]
    if note:
        ev[-1] = ctx.evidence(q.lines[-1], note)
    return ev


def _is_oneoff(q: Enqueue) -> bool:
    return q.origin == "cron" or (q.process is not None and dyno_type(q.process) in ("scheduler", "run"))


def _who(q: Enqueue) -> str:
    if q.process is None:
        return "no logged enqueue (the run appeared on a worker: a console, `celery call`, another app)"
    kind = "cron" if q.origin == "cron" else dyno_type(q.process)
    if kind in ONEOFF_TYPES:
        return ONEOFF_TYPES[kind].format(p=q.process)
    return q.process


def _deploys_near(ctx: Ctx, at: datetime) -> list[Event]:
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


def _check_days(story: JobStory, ctx: Ctx) -> list[LogFinding]:
    out: list[LogFinding] = []
    by_day: dict[date, list[Enqueue]] = defaultdict(list)
    for q in story.enqueues:
        by_day[ctx.day(q.at)].append(q)
    has_clock = any(q.clock for q in story.enqueues)
    for day, qs in sorted(by_day.items()):
        # a lone enqueue outside the clock is worth a finding when a clock schedules the job, or when it came
        # from a one-off dyno or cron (after a migration the old trigger is exactly that)
        if len(qs) < 2 and not any(not q.clock and (has_clock or _is_oneoff(q)) for q in qs):
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


def _multiple_clocks(story: JobStory, ctx: Ctx, day: date, clocks: dict[str, list[Enqueue]]) -> LogFinding:
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
                fix=FIX_CLOCKS, evidence=unique_evidence(ev))
    return LogFinding(finding=f, job=story.job, day=day)


def _same_clock_twice(story: JobStory, ctx: Ctx, day: date, key: str, first: Enqueue, again: Enqueue) -> LogFinding:
    host = again.lines[-1].host if again.lines else None
    restarts = restarts_between(ctx, key, host, first.at, again.at)
    hm = again.at.astimezone(ctx.zone).strftime("%H:%M:%S")
    if restarts and (zone_fix := _zone_fixed(story, ctx, day, key, first, again, restarts)) is not None:
        return zone_fix
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
                    fix=FIX_RESTART, evidence=unique_evidence(ev))
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


def _zone_fixed(story: JobStory, ctx: Ctx, day: date, key: str, first: Enqueue, again: Enqueue,
                restarts: list[Event]) -> LogFinding | None:
    """A clock restarted with its zone set (host time → the schedule's zone) fires at the new time the same day: the
    old fire's wall time in the clock's own zone is the new fire's wall time in the schedule's zone (08:00 UTC, then
    08:00 Chicago), and not the old fire's time in the schedule's zone (then nothing moved)."""
    off = next((o for o in map(_host_offset, first.lines) if o is not None), timedelta(0))
    old_wall = (first.at.astimezone(UTC) + off).strftime("%H:%M")
    new_wall = again.at.astimezone(ctx.zone).strftime("%H:%M")
    if old_wall != new_wall or first.at.astimezone(ctx.zone).strftime("%H:%M") == new_wall:
        return None
    ev = _enqueue_evidence(ctx, first, f"{old_wall} in the clock's own zone (UTC{offset_text(off)})")
    ev += [ctx.evidence(r) for r in restarts[-1:]]
    ev += _enqueue_evidence(ctx, again, f"{new_wall} in {ctx.tz}: the schedule's zone is set now")
    f = Finding(code="timezone", severity="error", subject=f"job:{story.job}",
                summary=f"{story.job} ran twice on {day}: {key} fired at {old_wall} of its own zone "
                        f"(UTC{offset_text(off)}, {first.at.astimezone(ctx.zone).strftime('%H:%M')} in {ctx.tz}), "
                        f"was restarted with the schedule's zone set, and fired again at {new_wall} {ctx.tz} the "
                        "same day",
                fix=FIX_UTC.format(tz=ctx.tz) + " Deploy such a change after the day's fire in both zones, or "
                    "skip a day already served.", evidence=unique_evidence(ev))
    return LogFinding(finding=f, job=story.job, day=day)


def duration_since(a: datetime, b: datetime) -> str:
    return duration_text((b - a).total_seconds())


def _leftover(story: JobStory, ctx: Ctx, day: date, q: Enqueue, qs: list[Enqueue], doubled: bool) -> LogFinding:
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
    elif any(x.clock for x in story.enqueues):
        summary = f"{story.job} was enqueued on {day} at {hm} by {who}, not by the clock that schedules it"
    else:
        summary = f"{story.job} was enqueued on {day} at {hm} by {who}: an old trigger still fires (ignore this if " \
                  "it is the trigger you mean to keep)"
    f = Finding(code="leftover-trigger", severity="error" if doubled else "warning", subject=f"job:{story.job}",
                summary=summary, fix=FIX_LEFTOVER, evidence=unique_evidence(ev))
    return LogFinding(finding=f, job=story.job, day=day)


def _check_retries(story: JobStory, ctx: Ctx) -> list[LogFinding]:
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
                    evidence=unique_evidence(ev))
        out.append(LogFinding(finding=f, job=story.job, day=day))
    return out


def _check_concurrent(story: JobStory, ctx: Ctx) -> list[LogFinding]:
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
                        fix=FIX_CONCURRENT, evidence=unique_evidence(ev))
            out.append(LogFinding(finding=f, job=story.job, day=day))
    return out


def _hms(ctx: Ctx, at: datetime) -> str:
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


def _check_timezone(story: JobStory, ctx: Ctx) -> list[LogFinding]:
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
                    fix=FIX_TZ.format(tz=ctx.tz), evidence=unique_evidence(ev))
        out.append(LogFinding(finding=f, job=story.job, day=None))
    # 2. a fixed UTC time across a DST change of the schedule's zone: the schedule runs in UTC
    firsts = first_clock_per_day(story.enqueues, ctx)
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
                        fix=FIX_UTC.format(tz=ctx.tz), evidence=unique_evidence(ev))
            out.append(LogFinding(finding=f, job=story.job, day=None))
    out += _fixed_in_host_time(story, ctx, firsts)
    return out


def _fixed_in_host_time(story: JobStory, ctx: Ctx, firsts: list[Enqueue]) -> list[LogFinding]:
    """A schedule kept in the host's zone: constant in host wall time while the host's offset changes (its DST
    dates differ from the schedule zone's, e.g. Europe/Berlin vs America/Chicago: weeks an hour off)."""
    series: list[tuple[Enqueue, timedelta]] = []
    for q in firsts:
        off = next((o for o in map(_host_offset, q.lines) if o is not None), None)
        if off is None:
            return []
        series.append((q, off))
    if len(series) < 4 or len({off for _, off in series}) < 2:
        return []
    host_times = Counter((q.at.astimezone(UTC) + off).strftime("%H:%M") for q, off in series)
    local_times = Counter(q.at.astimezone(ctx.zone).strftime("%H:%M") for q, _ in series)
    mode, n = host_times.most_common(1)[0]
    if n < 0.9 * len(series) or len(local_times) < 2 or local_times.most_common(1)[0][1] >= n:
        return []
    usual = local_times.most_common(1)[0][0]
    odd = [(q, off) for q, off in series if q.at.astimezone(ctx.zone).strftime("%H:%M") != usual]
    normal = next(p for p in series if p not in odd)
    offsets = " and ".join(f"UTC{offset_text(o)}" for o in sorted({off for _, off in series}))
    ev = [ctx.evidence(normal[0].lines[-1], f"{mode} host time (UTC{offset_text(normal[1])}) = {usual} in {ctx.tz}"),
          ctx.evidence(odd[0][0].lines[-1], f"still {mode} host time (UTC{offset_text(odd[0][1])}) = "
                                            f"{odd[0][0].at.astimezone(ctx.zone).strftime('%H:%M %Z')}"),
          ctx.evidence(odd[-1][0].lines[-1])]
    days = sorted({ctx.day(q.at) for q, _ in odd})
    f = Finding(code="timezone", severity="warning", subject=f"job:{story.job}",
                summary=f"{story.job} fires at {mode} in the host's zone ({offsets}), whose DST dates are not "
                        f"{ctx.tz}'s: on {len(days)} day(s) from {days[0]} to {days[-1]} it ran at another time "
                        f"in {ctx.tz} ({', '.join(sorted(local_times))})",
                fix=FIX_UTC.format(tz=ctx.tz), evidence=unique_evidence(ev))
    return [LogFinding(finding=f, job=story.job, day=None)]


def _check_fire_time(story: JobStory, ctx: Ctx, explained: set[date]) -> list[LogFinding]:
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
            summary = (f"{what} at the fire time ({story.fire_local}) on {day}, and {story.job} was not enqueued "
                       "that day")
            code, severity = "lost", "error"
        else:
            summary = f"{what} at the fire time ({story.fire_local}) on {day}: {story.job} was enqueued {n} time(s); " \
                      "a restart at that moment can skip or repeat the day"
            code, severity = "clock-restart", "warning"
        f = Finding(code=code, severity=severity, subject=f"job:{story.job}", summary=summary, fix=FIX_FIRE_RESTART,
                    evidence=tuple(ctx.evidence(e) for e in evs[:4]))
        out.append(LogFinding(finding=f, job=story.job, day=day))
    return out


def analyse(events: list[Event], *, tz: str, job: str | None = None, clocks: set[str] | None = None,
            floating: list[Event] | None = None
            ) -> tuple[list[JobStory], list[LogFinding], list[DayRow], dict[str, str]]:
    """Build the jobs' stories from ``events`` and run every check.

    Args:
        events: parsed events, any order (sorted here, in place, by instant, then file and line).
        tz: the schedule's IANA zone: days, fire times and evidence are shown in it.
        job: only this job (class, task, or the clock's name for it).
        clocks: the clock processes when ``events`` leaves out lines that show them (noise; see
            :class:`~.story.Ctx`); default: found in ``events``.
        floating: when a list, receives the lines tied to an attempt by process and thread alone (:class:`~.story.Ctx`).
    Returns:
        ``(stories, findings, per-day rows, aliases)``.
    """
    # by (instant, file, line): three stable sorts on one key each, in place, so that no key tuple per event and
    # no second list is made (the events of a large log are most of the doctor's memory)
    events.sort(key=lambda e: e.line.number)
    events.sort(key=lambda e: e.line.file)
    events.sort(key=lambda e: e.at)
    events[:] = link_sidekiq(events)  # in place too: the Sidekiq lines it drops are freed, not kept by the caller
    ctx = Ctx(events, tz, clocks)
    ctx.floating = floating
    enqueues, runs, aliases = build(events, ctx)
    stories = stories_of(enqueues, runs, aliases, ctx, job)
    findings: list[LogFinding] = []
    rows: list[DayRow] = []
    for story in stories:
        day_findings = _check_days(story, ctx) if story.daily else []
        # a day whose double enqueue a finding already explains (two clocks, a restart that fired on boot, a zone
        # fix) needs no second word about a clock restarted or stopped at its fire time (a clock scaled down)
        explained = {f.day for f in day_findings if f.day is not None and f.finding.severity == "error"}
        findings += day_findings
        findings += _check_retries(story, ctx)
        findings += _check_concurrent(story, ctx)
        findings += _check_timezone(story, ctx)
        findings += _check_fire_time(story, ctx, explained)
        rows += day_rows(story, ctx)
    return stories, findings, rows, aliases

