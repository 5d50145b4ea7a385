"""Checks of time: ``timezone`` (zones, DST moves) and ``clock-skew``."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

from ...schedules import Schedule
from .. import evidence as ev
from ..dst import Transition, fates, transitions
from ..facts import Facts, Proc
from ..model import Evidence, Finding, duration_text
from .common import PAST_DST_LOOKBACK, SKEW_ERROR, SKEW_TOLERANCE, UPCOMING_DST, Skip, capped, period_of, plural

# --- timezone --------------------------------------------------------------------------------------------


_UTC_NAMES = {"UTC", "Etc/UTC", "Etc/Universal", "Universal", "Zulu", "Etc/Zulu", "GMT", "Etc/GMT", "UCT", "Etc/UCT"}


def _same_zone(a: str, b: str) -> bool:
    a, b = a.lstrip(":"), b.lstrip(":")
    return a == b or (a in _UTC_NAMES and b in _UTC_NAMES)


def check_timezone(facts: Facts) -> list[Finding]:
    face = facts.face
    findings: list[Finding] = []
    rows = facts.schedule_rows()

    # a) process TZ against schedule zones
    procs = [p for p in facts.processes() if p.tz_env]
    by_tz: dict[str, list[Proc]] = defaultdict(list)
    for p in procs:
        by_tz[str(p.tz_env)].append(p)
    for tz_env, ps in sorted(by_tz.items()):
        differ = [r for r in rows if not _same_zone(tz_env, str(r["tz"]))]
        if not differ:
            continue
        ps.sort(key=lambda p: p.started_at, reverse=True)
        zones = ", ".join(sorted({f"{r['key']} in {r['tz']}" for r in differ}))
        findings.append(Finding(
            code="timezone", severity="warning",
            summary=(f"{plural(len(ps), 'process', 'processes')} run with TZ={tz_env} while schedules are in other "
                     f"zones ({zones}): oncebeat uses each schedule's zone, but task code that calls date.today() "
                     f"or datetime.now() gets {tz_env} dates"),
            subject=f"process:{ps[0].id}",
            evidence=capped([ev.process(p, face) for p in ps] + [ev.schedule(r, face) for r in differ],
                             total=len(ps) + len(differ)),
            fix=("Use ctx.business_date() (the occurrence's local date in the schedule zone) in task code, never the "
                 "host's date; or set TZ to the schedule's zone on these processes.")))

    for row in rows:
        sched = facts.parsed(row)
        if sched is None:
            continue
        key, tz = str(row["key"]), str(row["tz"])
        # b) two fires on one local date of a daily schedule
        if period_of(sched, facts.now) >= timedelta(hours=20):
            changes = [e for e in facts.events("schedule.changed") if e["subject"] == f"schedule:{key}"]
            for day in facts.store.read("doctor_same_day_fires", schedule_key=key, since=facts.since):
                occs = facts.store.read("doctor_occurrences_on_date", schedule_key=key,
                                        business_date=day["business_date"])
                fired = [o for o in occs if o["outcome"] in ("enqueued", "backfilled")]
                lo, hi = fired[0]["created_at"], fired[-1]["created_at"]
                between = [c for c in changes if lo <= c["at"] <= hi]
                why = ("after the schedule changed " + "; ".join(
                    f"{face.text(c['at'], tz)} from {(c.get('detail') or {}).get('old')} to "
                    f"{(c.get('detail') or {}).get('new')}"
                    for c in between)) if between else "without a schedule change between them"
                findings.append(Finding(
                    code="timezone", severity="warning",
                    summary=(f"daily schedule {key} fired {plural(len(fired), 'time')} for business date "
                             f"{day['business_date']} ({why})"),
                    subject=f"schedule:{key}",
                    evidence=capped([ev.occurrence(o, face) for o in fired]
                                     + [ev.event(c, face, tz) for c in between]),
                    fix=("Harmless for a task that is idempotent per business date; other tasks should key "
                         "their effects by ctx.business_date(). Change a schedule's zone or time after the day's run "
                         "only if a second run that day is acceptable.")))

        # c) past fires moved by a DST transition, and d) upcoming transitions within 30 days
        if sched.is_interval:
            continue
        start = max(facts.since_arg or facts.now - PAST_DST_LOOKBACK, row["active_since"])
        for tr in transitions(tz, start, facts.now):
            moved = _moved_fires(facts, row, sched, tr)
            if moved:
                findings.append(moved)
        for tr in transitions(tz, facts.now, facts.now + UPCOMING_DST):
            upcoming = _upcoming(facts, row, sched, tr)
            if upcoming:
                findings.append(upcoming)
    return findings


def _transition_evidence(facts: Facts, tr: Transition) -> Evidence:
    start, end = tr.window()
    return ev.transition(text=tr.describe(), tz=tr.tz, at=tr.at, offset_before=tr.before.total_seconds(),
                         offset_after=tr.after.total_seconds(), type_=tr.kind, face=facts.face,
                         local_window=[f"{start:%Y-%m-%dT%H:%M}", f"{end:%Y-%m-%dT%H:%M}"])


def _moved_fires(facts: Facts, row: dict[str, Any], sched: Schedule, tr: Transition) -> Finding | None:
    """A past transition: the ledger's fires at the instants the DST rule chose, and the wall times it dropped."""
    walls = fates(sched, tr)
    if not walls:
        return None
    key, tz = str(row["key"]), str(row["tz"])
    margin = 2 * tr.width + timedelta(hours=1)
    occs = facts.store.read("doctor_occurrences_between", schedule_key=key, start=tr.at - margin, end=tr.at + margin)
    by_instant = {o["fire_at"]: o for o in occs if o["tz"] == tz and o["outcome"] != "manual"}
    zone = facts.face.zone(tz)
    fired: list[Evidence] = []
    dropped: list[Evidence] = []
    rules: list[str] = []
    for w in walls:
        for t in w.instants:
            o = by_instant.get(t)
            if o is not None:
                fired.append(ev.occurrence(o, facts.face, note=(
                    f"wall time {w.wall:%H:%M} -> {t.astimezone(zone):%H:%M:%S %Z}: {w.rule}")))
                rules.append(w.rule)
        if not w.instants:
            dropped.append(ev.note(w.describe(tz), wall=f"{w.wall:%Y-%m-%dT%H:%M}", instants=[], rule=w.rule))
            rules.append(w.rule)
    if not fired and not dropped:
        return None  # the schedule did not run then (paused, or not yet defined)
    rule_text = "; ".join(dict.fromkeys(rules))
    what = (f"{plural(len(fired), 'fire')} at instants chosen by the DST rule" if fired else "")
    what += (", " if fired and dropped else "") + (f"{plural(len(dropped), 'wall time')} with no "
                                                   "run" if dropped else "")
    return Finding(
        code="timezone", severity="info",
        summary=(f"{key} ({row['expression']} in {tz}) around the {tr.kind} of {tr.window()[0]:%Y-%m-%d}: {what} "
                 f"({rule_text})"),
        subject=f"schedule:{key}",
        evidence=capped([_transition_evidence(facts, tr)] + fired + dropped),
        fix="Nothing to do: this is the documented DST rule; choose dst_gap/dst_fold on the schedule to change it.")


def _upcoming(facts: Facts, row: dict[str, Any], sched: Schedule, tr: Transition) -> Finding | None:
    walls = fates(sched, tr)
    if not walls:
        return None
    key, tz = str(row["key"]), str(row["tz"])
    items = [_transition_evidence(facts, tr)] + [
        ev.note(w.describe(tz), wall=f"{w.wall:%Y-%m-%dT%H:%M}", instants=[facts.face.json(t, tz) for t in w.instants],
                rule=w.rule) for w in walls]
    return Finding(
        code="timezone", severity="info",
        summary=(f"in {duration_text((tr.at - facts.now).total_seconds())} ({tr.window()[0]:%Y-%m-%d}) {tz} has a "
                 f"{tr.kind}; {key} ({row['expression']}) matches {plural(len(walls), 'wall time')} in it: "
                 f"{walls[0].rule}"),
        subject=f"schedule:{key}", evidence=capped(items),
        fix=("Nothing to do if that is what you want; otherwise set dst_gap (shift|skip) or dst_fold "
             "(first|second|both) on the schedule, or move it out of the transition hour."))


# --- clock-skew ------------------------------------------------------------------------------------------


def check_clock_skew(facts: Facts) -> list[Finding]:
    face = facts.face
    if facts.store.backend != "postgres":
        raise Skip("SQLite has no server clock", [Finding(
            code="clock-skew", severity="info",
            summary=("clock skew not checked: SQLite has no server clock to compare with (every process using the "
                     "file runs on this host and shares its clock)"),
            evidence=(ev.note("skipped on SQLite", backend=facts.store.backend),),
            fix="Nothing to do; on PostgreSQL the doctor compares process clocks with the server's now().")])
    db_now = facts.db_now
    limit = db_now + SKEW_TOLERANCE
    findings: list[Finding] = []
    ahead: dict[tuple[str, int], list[Evidence]] = defaultdict(list)
    worst: dict[tuple[str, int], timedelta] = {}
    label: dict[tuple[str, int], str] = {}
    for p in facts.processes():
        if p.heartbeat_at > limit:
            k = (p.host, p.pid)
            d = p.heartbeat_at - db_now
            worst[k] = max(worst.get(k, d), d)
            label[k] = f"{p.name} pid {p.pid} on {p.host}"
            ahead[k].append(ev.process(p, face))
            ahead[k].append(ev.measurement(
                text=(f"process {p.id} stamped its heartbeat {face.text(p.heartbeat_at)} but the server's clock "
                      f"reads {face.text(db_now)}: at least {duration_text(d.total_seconds())} ahead"),
                what="heartbeat_ahead_of_server", value_seconds=d.total_seconds(), at=p.heartbeat_at,
                reference=db_now, face=face, process_id=p.id, host=p.host, pid=p.pid))
    for r in facts.store.read("doctor_future_events", after=limit):
        k = (r["source_host"], int(r["source_pid"]))
        d = r["last_at"] - db_now
        worst[k] = max(worst.get(k, d), d)
        label.setdefault(k, f"{r['source_name']} pid {r['source_pid']} on {r['source_host']}")
        ahead[k].append(ev.measurement(
            text=(f"{plural(int(r['n']), 'audit event')} from {r['source_name']} pid {r['source_pid']} on "
                  f"{r['source_host']} are stamped in the server's future (latest {face.text(r['last_at'])})"),
            what="events_ahead_of_server", value_seconds=d.total_seconds(), at=r["last_at"], reference=db_now,
            face=face, process_id=r.get("process_id"), host=r["source_host"], pid=r["source_pid"], count=int(r["n"])))
    for k, items in sorted(ahead.items(), key=lambda kv: -worst[kv[0]]):
        d = worst[k]
        findings.append(Finding(
            code="clock-skew", severity="error" if d >= SKEW_ERROR else "warning",
            summary=(f"the clock of {label[k]} runs at least {duration_text(d.total_seconds())} ahead of the "
                     "database server's"),
            subject=f"host:{k[0]}", evidence=capped(items),
            fix=("Synchronise that host's clock (NTP/chrony): leases and fire instants written by one host are "
                 "judged by others, so a clock ahead rescues live jobs early and fires early.")))
    return findings
