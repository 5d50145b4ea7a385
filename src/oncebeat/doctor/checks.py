"""The doctor's checks: one function per cause code, each returning its findings.

Every check reads through :class:`~oncebeat.doctor.facts.Facts` and explains
what it saw with evidence rows (ids, instants local and UTC, hosts and pids)
and a fix. Severity: ``error`` when something was duplicated, lost, or needs a
person now; ``warning`` for a risk or a leftover that the engine absorbed;
``info`` for what happened as designed but is worth knowing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from .. import ledger
from ..app import ScheduleDef
from ..effects import list_effects
from ..pauses import held_jobs
from ..provenance import Operator
from ..schedules import Schedule
from . import evidence as ev
from . import manual
from .dst import Transition, fates, transitions
from .facts import EPOCH, Facts, Proc, source_text, version_key
from .model import Evidence, Finding, duration_text
from .registry import register_check

__all__ = ["Skip", "MAX_EVIDENCE", "MAX_FINDINGS_PER_CHECK", "RESTART_WINDOW", "OVERDUE_AFTER", "SKEW_TOLERANCE",
           "UPCOMING_DST", "LEASE_RESCUE_EXPECTED", "capped", "plural"]

MAX_EVIDENCE = 20  # evidence rows per finding; the rest is counted in a note
MAX_FINDINGS_PER_CHECK = 50
RESTART_WINDOW = timedelta(minutes=15)  # a clock start this soon after a fire instant is "near" it
# two clocks overlapping this briefly, rejecting nothing, are a deploy's handover
HANDOVER_GRACE = timedelta(seconds=60)
OLD_VERSION_GRACE = timedelta(minutes=10)  # an old version may outlive a new one's start by this much (rolling deploy)
OVERDUE_AFTER = timedelta(hours=1)  # a due job unclaimed this long means no worker takes its queue
LEASE_RESCUE_EXPECTED = timedelta(minutes=5)  # workers rescue every 15 s; an expired lease older than this is stuck
SKEW_TOLERANCE = timedelta(seconds=5)
SKEW_ERROR = timedelta(seconds=30)  # ahead by a lease (30 s default): live jobs get rescued early
UPCOMING_DST = timedelta(days=30)
PAST_DST_LOOKBACK = timedelta(days=60)  # without --since, past DST moves are shown for this long


class Skip(Exception):
    """A check could not run; the message says why (shown in the report's ``checks``).

    ``findings`` are still reported (e.g. the info finding saying clock skew is not checked on SQLite).
    """

    def __init__(self, reason: str, findings: Iterable[Finding] = ()) -> None:
        super().__init__(reason)
        self.findings = list(findings)


def capped(items: Iterable[Evidence], total: int | None = None, what: str = "rows") -> tuple[Evidence, ...]:
    """At most :data:`MAX_EVIDENCE` items, then a note counting the rest (of ``total`` when given)."""
    out = list(items)
    n = total if total is not None else len(out)
    if len(out) > MAX_EVIDENCE:
        out = out[:MAX_EVIDENCE]
    if n > len(out):
        out.append(ev.note(f"... and {n - len(out)} more {what}", more=n - len(out)))
    return tuple(out)


def plural(n: int, word: str, plural_form: str | None = None) -> str:
    """``plural(2, "job")`` → ``"2 jobs"``; ``plural_form`` for irregular words."""
    return f"{n} {word if n == 1 else (plural_form or word + 's')}"


def _clocks(facts: Facts) -> list[Proc]:
    out = []
    for p in facts.processes():
        if p.role != "clock":
            continue
        keys = p.schedules()
        if facts.schedule_keys is not None and keys is not None and not (set(keys) & facts.schedule_keys):
            continue
        out.append(p)
    return out


# --- multiple-clocks ------------------------------------------------------------------------------------


def check_multiple_clocks(facts: Facts) -> list[Finding]:
    face = facts.face
    clocks = _clocks(facts)
    dups = facts.events("occurrence.duplicate_rejected")
    dups_by_proc: dict[int | None, list[dict[str, Any]]] = defaultdict(list)
    for d in dups:
        dups_by_proc[d.get("process_id")].append(d)

    # Connected groups of clocks whose lifetimes overlap.
    groups: list[list[Proc]] = []
    for p in sorted(clocks, key=lambda c: c.started_at):
        joined = [g for g in groups if any(p.overlaps(q) for q in g)]
        merged = [p] + [q for g in joined for q in g]
        groups = [g for g in groups if g not in joined] + [merged]
    findings: list[Finding] = []
    covered: set[int] = set()
    for group in groups:
        if len(group) < 2:
            continue
        group.sort(key=lambda c: (c.started_at, c.id))
        ids = {p.id for p in group}
        rejected = [d for pid in sorted(ids) for d in dups_by_proc.get(pid, [])]
        rejected.sort(key=lambda d: d["id"])
        overlaps = []
        longest = timedelta(0)
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if a.overlaps(b):
                    start, end = a.overlap(b)
                    longest = max(longest, end - start)
                    overlaps.append(ev.note(
                        f"processes {a.id} and {b.id} both alive from {face.text(start)} to {face.text(end)} "
                        f"(their last signs of life)", processes=[a.id, b.id], start=face.json(start),
                        end=face.json(end)))
        if not rejected and longest < HANDOVER_GRACE:
            continue  # a brief handover (deploy, restart) that fired nothing twice
        covered |= ids
        per_proc = Counter(d.get("process_id") for d in rejected)
        counts = "; ".join(f"process {pid}: {n}" for pid, n in sorted(per_proc.items())) or "none"
        peak, start = _most_alive_at_once(group)
        more = f", {len(group)} clocks overlapping over the whole stretch" if len(group) > peak else ""
        summary = (f"{peak} clock processes were alive at the same time (at {face.text(start)}{more}); "
                   f"the occurrence ledger rejected {plural(len(rejected), 'duplicate fire')} ({counts})")
        items = [ev.process(p, face) for p in group] + overlaps + [_dup_evidence(facts, d) for d in rejected]
        findings.append(Finding(
            code="multiple-clocks", severity="warning", summary=summary, subject=f"process:{group[0].id}",
            evidence=capped(items),
            fix=("Run exactly one clock: scale the clock process (or `oncebeat run`) to one instance and stop the "
                 "others. Nothing ran twice: the ledger's unique (schedule, instant) key turned their fires away.")))

    # Rejected duplicates from firers not seen overlapping in the registry (unregistered or old clocks).
    stray = [d for pid, rows in dups_by_proc.items() if pid is None or pid not in covered for d in rows
             if d["source_kind"] == "clock"]
    by_source: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for d in stray:
        by_source[(d["source_host"], int(d["source_pid"]), d["source_name"])].append(d)
    for (host, pid, name), rows in sorted(by_source.items()):
        findings.append(Finding(
            code="multiple-clocks", severity="warning",
            summary=(f"another clock ({name} pid {pid} on {host}) tried to fire {plural(len(rows), 'occurrence')} "
                     "that were already recorded; the ledger rejected them"),
            subject=str(rows[0]["subject"]), evidence=capped(_dup_evidence(facts, d) for d in rows),
            fix=("Find and stop the second clock on that host; only one clock should run. Nothing ran twice: the "
                 "ledger rejected each duplicate.")))
    return findings


def _why_in_doubt(detail: Any) -> str:
    """How the attempt lost track of its effect: its process died, or (detail ``outcome unknown: …``, written by
    ``effects`` when the effect itself could not report back, e.g. the SMTP connection dropped after the message
    content was sent) the process lived on but never heard whether the effect happened."""
    text = str(detail or "")
    if text.startswith("outcome unknown"):
        return f"did it but never learned whether it took effect ({text}); the worker itself kept running"
    return "died between its point of no return and recording it"


def _most_alive_at_once(procs: list[Proc]) -> tuple[int, datetime]:
    """The largest number of processes certainly alive at one instant (``started_at``..``last_seen``), and the
    first instant it happened; a chain of restarts that each overlapped the next counts 2, not its length."""
    # Sweep the interval ends; at equal instants a start is counted before an end (the intervals are closed).
    marks = sorted([(p.started_at, 0) for p in procs] + [(p.last_seen, 1) for p in procs])
    alive, peak, at = 0, 0, procs[0].started_at
    for instant, is_end in marks:
        alive += -1 if is_end else 1
        if alive > peak:
            peak, at = alive, instant
    return peak, at


def _dup_evidence(facts: Facts, d: dict[str, Any]) -> Evidence:
    detail = d.get("detail") or {}
    key = str(d["subject"]).partition(":")[2]
    tz = facts.tz_of(key)
    fire = _parse_iso(detail.get("fire_at"))
    text = (f"{source_text(d)} tried to record {key} at {facts.face.text(fire, tz) if fire else detail.get('fire_at')} "
            f"({detail.get('attempted')}) again: rejected")
    return ev.event(d, facts.face, tz, text=text)


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


# --- clock-restart ---------------------------------------------------------------------------------------


def _period(s: Schedule, now: datetime) -> timedelta:
    a = s.next_after(now)
    b = s.next_after(a)
    c = s.next_after(b)
    return min(b - a, c - b)


def check_clock_restart(facts: Facts) -> list[Finding]:
    """Clock restarts near fire instants and what the catch-up policy decided; catch-ups between ticks."""
    face = facts.face
    clocks = sorted(_clocks(facts), key=lambda c: (c.started_at, c.id))
    all_clocks = sorted((p for p in facts.processes() if p.role == "clock"), key=lambda c: (c.started_at, c.id))
    catchups = facts.events("clock.catchup")
    used: set[int] = set()
    findings: list[Finding] = []
    rows = facts.schedule_rows()
    for p in clocks:
        if p.started_at < facts.since:
            continue
        earlier = [q for q in all_clocks if q.started_at < p.started_at and q.id != p.id]
        mine = [c for c in catchups if c.get("process_id") == p.id and (c.get("detail") or {}).get("at_startup")]
        near: list[Evidence] = []
        # A restart is a start with no other clock still showing life (a second clock alongside is multiple-clocks).
        restart = bool(earlier) and not any(q.seen_after_start_of(p) for q in earlier)
        for row in rows if restart else []:
            sched = facts.parsed(row)
            if sched is None or _period(sched, facts.now) < timedelta(hours=1):
                continue
            fire = sched.previous_before(p.started_at + timedelta(microseconds=1))
            if fire is None or p.started_at - fire > RESTART_WINDOW or fire <= row["active_since"]:
                continue
            o = ledger.occurrence_at(facts.store, row["key"], fire)
            tz = str(row["tz"])
            if o is not None:
                by_me = o["source_pid"] == p.pid and o["source_host"] == p.host and o["created_at"] >= p.started_at
                what = (f"this clock recorded it at start-up as {o['outcome']}" if by_me else
                        f"already recorded ({o['outcome']}) {face.text(o['created_at'], tz)} by {source_text(o)}: "
                        "nothing fired again on boot")
            else:
                what = "no occurrence recorded for it"
            near.append(ev.note(
                f"started {duration_text((p.started_at - fire).total_seconds())} after the {row['key']} fire at "
                f"{face.text(fire, tz)}; {what}", schedule=row["key"], fire_at=face.json(fire, tz),
                occurrence_id=o["id"] if o is not None else None))
        if not near and not mine:
            continue
        used |= {int(c["id"]) for c in mine}
        before = max(earlier, key=lambda q: q.end) if earlier else None
        gap = (p.started_at - before.last_seen) if before else None
        outcomes: Counter[str] = Counter()
        outside = 0
        for c in mine:
            outcomes.update((c.get("detail") or {}).get("outcomes") or {})
            outside += int((c.get("detail") or {}).get("missed_outside_window") or 0)
        decisions = "; ".join(str((c.get("detail") or {}).get("summary")) for c in mine)
        if before is None:
            lead = f"clock {p.label()} started {face.text(p.started_at)}"
        elif gap is not None and gap > timedelta(0):
            lead = (f"clock {p.label()} started {face.text(p.started_at)}, {duration_text(gap.total_seconds())} "
                    f"after the previous clock (process {before.id}) was last seen")
        else:
            lead = f"clock {p.label()} started {face.text(p.started_at)} while process {before.id} was still alive"
        summary = lead + (f"; catch-up: {decisions}" if decisions else "; nothing was due, so nothing fired on boot")
        missed = outcomes.get("missed", 0) + outside
        items = [ev.process(p, face)] + ([ev.process(before, face)] if before else []) + near
        items += [ev.event(c, face, facts.tz_of(str(c["subject"]).partition(":")[2])) for c in mine]
        keys = sorted({str(c["subject"]).partition(":")[2] for c in mine})
        findings.append(Finding(
            code="clock-restart", severity="warning" if missed else "info", summary=summary,
            subject=f"process:{p.id}", evidence=capped(items), fix=_restart_fix(missed, keys)))
    return findings + _catchups_between_ticks(facts, [c for c in catchups if int(c["id"]) not in used])


def _catchups_between_ticks(facts: Facts, catchups: list[dict[str, Any]]) -> list[Finding]:
    """Catch-ups not made at a clock's start: the clock was stalled, suspended or starved."""
    face = facts.face
    findings: list[Finding] = []
    for c in catchups:
        detail = c.get("detail") or {}
        key = str(c["subject"]).partition(":")[2]
        outcomes = Counter(detail.get("outcomes") or {})
        missed = outcomes.get("missed", 0) + int(detail.get("missed_outside_window") or 0)
        proc = facts.proc(c.get("process_id"))
        start_note = ("at start-up" if detail.get("at_startup")
                      else "between two ticks (the clock was stalled or suspended)")
        findings.append(Finding(
            code="clock-restart", severity="warning" if missed else "info",
            summary=f"catch-up {start_note}: {detail.get('summary')}", subject=str(c["subject"]),
            evidence=capped([ev.event(c, face, facts.tz_of(key))] + ([ev.process(proc, face)] if proc else [])),
            fix=_restart_fix(missed, [key])))
    return findings


def _restart_fix(missed: int, keys: list[str]) -> str:
    if missed:
        key = keys[0] if keys else "KEY"
        return (f"{plural(missed, 'occurrence')} did not run (catch-up policy or window). If they should have, "
                f"run `oncebeat backfill {key} --start ... --end ...`; to catch up by itself next time set "
                "catchup = \"latest\" or \"all\" with a wider catchup_window.")
    return ("Nothing to do: the clock decided from the occurrence ledger, never from its own memory, so the restart "
            "fired nothing twice. Change the schedule's catchup/catchup_window if the decision is not the one you "
            "want.")


# --- leftover-trigger ------------------------------------------------------------------------------------


def check_leftover_trigger(facts: Facts) -> list[Finding]:
    """Fires and jobs from outside the clock, old versions and definitions, retired schedules still held."""
    findings: list[Finding] = []
    for part in (_manual_fires, _rejected_manual_fires, _direct_jobs, _unregistered_clocks, _old_versions,
                 _stale_definitions, _retired_schedules, _definitions_differ):
        findings.extend(part(facts))
    return findings


def _manual_fires(facts: Facts) -> list[Finding]:
    """Occurrences fired outside the schedule (manual / cli / api), re-runs and backfills: an operator's own
    actions (:mod:`oncebeat.doctor.manual`) are info; the rest are leftovers."""
    occs = [o for o in facts.store.read("doctor_triggered_occurrences", since=facts.since) if facts.occurrence_ok(o)]
    verdicts = manual.judge(facts, occs)
    findings = _operator_actions(facts, [v for v in verdicts if v.by_operator])
    return findings + _leftover_fires(facts, [v for v in verdicts if not v.by_operator])


def _operator_actions(facts: Facts, verdicts: list[manual.Verdict]) -> list[Finding]:
    """One info finding per schedule and operator (CLI or dashboard, user, host, process name)."""
    face = facts.face
    findings: list[Finding] = []
    groups: dict[tuple[str, str, str, str, str], list[manual.Verdict]] = defaultdict(list)
    for v in verdicts:
        o, op = v.occurrence, v.operator
        assert op is not None
        groups[(o["schedule_key"], op.via, op.user or "", o["source_host"], o["source_name"])].append(v)
    for (key, via, user, host, name), rows in sorted(groups.items(), key=lambda g: g[1][0].occurrence["created_at"]):
        occs = [v.occurrence for v in rows]
        jobs = facts.load_jobs(int(o["job_id"]) for o in occs if o["job_id"])
        tz = str(occs[0]["tz"])
        terminals = {v.operator.terminal for v in rows if v.operator is not None}
        terminal = ("" if via != "cli" else ", from a terminal" if terminals == {True}
                    else ", without a terminal" if terminals == {False} else ", with and without a terminal")
        who = (f"an operator through the {'CLI' if via == 'cli' else 'dashboard'} ({name} on {host}, user "
               f"{user or 'unknown'}{terminal}, v{', v'.join(sorted({str(o['source_version']) for o in occs}))})")
        items = [ev.note(f"{v.action} (occurrence {v.occurrence['id']}) by {v.operator}",
                         occurrence_id=v.occurrence["id"], action=v.action,
                         **(v.operator.detail() if v.operator else {})) for v in rows]
        items += [ev.occurrence(o, face, note=f"re-run of occurrence {o['rerun_of']}" if o.get("rerun_of") else "")
                  for o in occs]
        items += [ev.job(j, face, tz) for j in jobs.values()]
        place = "the dashboard's operator token" if via == "dashboard" else f"a shell on {host}"
        findings.append(Finding(
            code="leftover-trigger", severity="info",
            summary=f"schedule {key}: {_actions_text(rows)} by {who}",
            subject=f"schedule:{key}", evidence=capped(items),
            fix=("Nothing to do: an operator's own action, recorded with who did it; each manual run is a run of its "
                 f"own and the clock's runs are unaffected. If nobody meant to, find who holds {place}.")))
    return findings


def _actions_text(rows: list[manual.Verdict]) -> str:
    """``triggered it 2 times, re-ran occurrences 4 and 9``."""
    parts = []
    triggered = [v for v in rows if v.action == "triggered"]
    if triggered:
        parts.append(f"triggered it {plural(len(triggered), 'time')}")
    reran = [str(v.occurrence.get("rerun_of")) for v in rows if v.action == "re-ran"]
    if len(reran) > 5:
        parts.append(f"re-ran {len(reran)} occurrences")  # their ids are in the evidence
    elif reran:
        ids = ", ".join(reran[:-1]) + f" and {reran[-1]}" if len(reran) > 1 else reran[0]
        parts.append(f"re-ran {'occurrences' if len(reran) > 1 else 'occurrence'} {ids}")
    backfilled = [v for v in rows if v.action == "backfilled"]
    if backfilled:
        parts.append(f"backfilled {plural(len(backfilled), 'occurrence')}")
    return ", ".join(parts)


def _leftover_fires(facts: Facts, verdicts: list[manual.Verdict]) -> list[Finding]:
    """Hand-made occurrences that are not an operator's action, by schedule and source."""
    face = facts.face
    findings: list[Finding] = []
    registry = facts.registry()
    groups: dict[tuple[str, str, str, str], list[manual.Verdict]] = defaultdict(list)
    for v in verdicts:
        o = v.occurrence
        groups[(o["schedule_key"], o["source_host"], o["source_name"], o["source_kind"])].append(v)
    for (key, host, name, kind), verdict_rows in sorted(groups.items(),
                                                         key=lambda g: g[1][0].occurrence["created_at"]):
        rows = [v.occurrence for v in verdict_rows]
        tz = str(rows[0]["tz"])
        only_backfill = all(r["outcome"] == "backfilled" for r in rows)
        unknown = [r for r in rows if (r["source_host"], int(r["source_pid"])) not in registry]
        jobs = facts.load_jobs(int(r["job_id"]) for r in rows if r["job_id"])
        repeating = manual.repeats_daily([r["fire_at"] for r in rows], facts.face.zone(tz))
        why = sorted({reason for v in verdict_rows for reason in v.reasons if reason != manual.NO_OPERATOR})
        history = all(v.reasons == (manual.PRUNED,) for v in verdict_rows)
        what = "backfilled" if only_backfill else "fired outside its schedule"
        summary = (f"schedule {key} was {what} {plural(len(rows), 'time')} by {kind} {name} on {host}"
                   + (" (not a registered process: a one-off command, a cron entry or an old deployment)"
                      if unknown else "")
                   + ("; the fires repeat at about the same local time each day: looks like a leftover cron "
                      "entry or scheduler add-on" if repeating else "")
                   + (f"; not taken as an operator's action: {'; '.join(why)}" if why else ""))
        items = [ev.occurrence(r, face) for r in rows]
        items += [ev.job(j, face, tz) for j in jobs.values()]
        if only_backfill:
            fix = "Nothing to do if the backfill was intended: each backfilled occurrence ran once."
        elif history:
            fix = ("Nothing to judge: the audit trail no longer says who fired these. Fires since the pruning are "
                   "judged one by one; keep the audit trail as long as you may need to explain an incident.")
        else:
            fix = (f"If no person did this, find what runs `oncebeat trigger {key}` (or the old command) on {host} "
                   "- a cron entry, a PaaS scheduler add-on, an old deploy - and remove it; the clock already fires "
                   f"{key}, and every manual fire is a run of its own.")
        findings.append(Finding(code="leftover-trigger", severity="info" if only_backfill or history else "warning",
                                summary=summary, subject=f"schedule:{key}", evidence=capped(items), fix=fix))
    return findings

def _rejected_manual_fires(facts: Facts) -> list[Finding]:
    """Manual fires at an instant already in the ledger: rejected, but someone is still triggering."""
    findings: list[Finding] = []
    registry = facts.registry()
    refused = [d for d in facts.events("occurrence.duplicate_rejected") if d["source_kind"] in ("manual", "cli", "api")]
    by_trigger: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for d in refused:
        by_trigger[(str(d["subject"]).partition(":")[2], d["source_host"], d["source_name"])].append(d)
    for (key, host, name), rows in sorted(by_trigger.items()):
        unregistered = any((d["source_host"], int(d["source_pid"])) not in registry for d in rows)
        findings.append(Finding(
            code="leftover-trigger", severity="warning",
            summary=(f"{plural(len(rows), 'manual fire')} of {key} by {rows[0]['source_kind']} {name} on {host} hit "
                     "an "
                     "instant already in the ledger and were rejected"
                     + (" (not a registered process)" if unregistered else "")),
            subject=f"schedule:{key}", evidence=capped(_dup_evidence(facts, d) for d in rows),
            fix=(f"Nothing ran twice; but if no person did this, find what runs `oncebeat trigger {key}` on {host} "
                 "and remove it.")))
    return findings

def _direct_jobs(facts: Facts) -> list[Finding]:
    """Jobs of scheduled tasks enqueued directly (not through an occurrence)."""
    face = facts.face
    findings: list[Finding] = []
    registry = facts.registry()
    tasks = sorted({str(r["task"]) for r in facts.schedule_rows(include_retired=True)})
    if tasks:
        direct = [j for j in facts.store.read("doctor_triggered_jobs", since=facts.since, tasks=tasks)
                  if j["occurrence_id"] is None and not facts.app_scoped]
        by_src: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for j in direct:
            by_src[(j["task"], j["source_host"], j["source_name"])].append(j)
        for (task, host, name), rows in sorted(by_src.items()):
            unregistered = any((j["source_host"], int(j["source_pid"])) not in registry for j in rows)
            kinds = sorted({str(j["source_kind"]) for j in rows})
            findings.append(Finding(
                code="leftover-trigger", severity="info" if kinds == ["api"] else "warning",
                summary=(f"{plural(len(rows), 'job')} of scheduled task {task} {'was' if len(rows) == 1 else 'were'} "
                         f"enqueued directly ({'/'.join(kinds)}) by {name} on {host}, outside any schedule occurrence"
                         + (" (not a registered process)" if unregistered else "")),
                subject=f"job:{rows[0]['id']}", evidence=capped(ev.job(j, face) for j in rows),
                fix=(f"Remove whatever enqueues {task} by hand on {host} (an old cron or script); the schedule "
                     "already runs it, and work enqueued outside an occurrence has no business date.")))
    return findings

def _unregistered_clocks(facts: Facts) -> list[Finding]:
    """Schedule fires (as a clock) from processes that are not in the registry."""
    face = facts.face
    findings: list[Finding] = []
    registry = facts.registry()
    for s in facts.store.read("doctor_occurrence_sources", since=facts.since):
        if s["source_kind"] != "clock" or not facts.schedule_ok(s["schedule_key"]):
            continue
        if (s["source_host"], int(s["source_pid"])) in registry:
            continue
        zone = facts.tz_of(s["schedule_key"])
        findings.append(Finding(
            code="leftover-trigger", severity="warning",
            summary=(f"an unregistered process ({s['source_name']} pid {s['source_pid']} on {s['source_host']}, "
                     f"v{s['source_version']}) recorded {plural(int(s['n']), 'occurrence')} of {s['schedule_key']} "
                     f"as a clock between {face.text(s['first_at'], zone)} and {face.text(s['last_at'], zone)}"),
            subject=f"schedule:{s['schedule_key']}",
            evidence=(ev.note("the process registry has no row for this host and pid",
                              host=s["source_host"], pid=s["source_pid"], name=s["source_name"],
                              version=s["source_version"], count=int(s["n"])),),
            fix=("Find that process and stop it, or upgrade it: every oncebeat clock registers itself, so this is "
                 "an old version or code that writes the ledger without ClockProcess.")))
    return findings

def _old_versions(facts: Facts) -> list[Finding]:
    """An old version still running next to a newer one."""
    face = facts.face
    findings: list[Finding] = []
    procs = [p for p in facts.processes() if p.role in ("clock", "worker")]
    if len({p.version for p in procs}) > 1:
        newest = max((p.version for p in procs), key=version_key)
        first_new = min(p.started_at for p in procs if p.version == newest)
        old = [p for p in procs if p.version != newest and p.last_seen > first_new + OLD_VERSION_GRACE]
        if old:
            findings.append(Finding(
                code="leftover-trigger", severity="warning",
                summary=(f"{plural(len(old), 'process', 'processes')} of an older version "
                         f"({', '.join(sorted({p.version for p in old}, key=version_key))}) kept running after "
                         f"v{newest} started at {face.text(first_new)}"),
                subject=f"process:{old[0].id}", evidence=capped(ev.process(p, face) for p in old),
                fix=("Stop the old processes (check for a second app, a forgotten dyno formation or a host that was "
                     "not redeployed); mixed versions may disagree about schedules and tasks.")))
    return findings

def _stale_definitions(facts: Facts) -> list[Finding]:
    """Clocks running older schedule definitions."""
    face = facts.face
    findings: list[Finding] = []
    stale = facts.events("clock.stale_definitions")
    by_proc: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in stale:
        by_proc[(e.get("process_id"), e["source_host"], e["source_pid"])].append(e)
    for (_pid, host, pid), rows in by_proc.items():
        p = facts.proc(rows[0].get("process_id"))
        findings.append(Finding(
            code="leftover-trigger", severity="warning",
            summary=(f"a clock with older schedule definitions is running ({rows[0]['source_name']} pid {pid} on "
                     f"{host}, v{rows[0]['source_version']}): it changes nothing and fires only the schedules it "
                     "shares with the newest set"),
            subject=f"process:{rows[0].get('process_id')}",
            evidence=capped(([ev.process(p, face)] if p else []) + [ev.event(e, face) for e in rows]),
            fix="Stop that clock and redeploy it with the current code (an old release is still running)."))
    return findings

def _retired_schedules(facts: Facts) -> list[Finding]:
    """Retired schedules still defined by running clocks, or (never) still firing."""
    face = facts.face
    findings: list[Finding] = []
    for row in facts.schedule_rows(include_retired=True):
        if row["state"] != "retired":
            continue
        retired_at = row["updated_at"]
        key = str(row["key"])
        tz = str(row["tz"])
        holders = [p for p in facts.processes() if p.role == "clock" and key in (p.schedules() or [])
                   and p.last_seen > retired_at + OLD_VERSION_GRACE]
        fired = facts.store.read("doctor_occurrences_after", schedule_key=key, after=retired_at)
        if fired:
            findings.append(Finding(
                code="leftover-trigger", severity="error",
                summary=f"retired schedule {key} (retired {face.text(retired_at, tz)}) has occurrences recorded after "
                        "it was retired",
                subject=f"schedule:{key}",
                evidence=capped([ev.schedule(row, face)] + [ev.occurrence(o, face) for o in fired]),
                fix="Stop the process that recorded them (see each occurrence's source); a retired schedule must never "
                    "fire."))
        if holders:
            findings.append(Finding(
                code="leftover-trigger", severity="warning",
                summary=(f"retired schedule {key} (retired {face.text(retired_at, tz)}) is still defined by "
                         f"{plural(len(holders), 'clock process', 'clock processes')} that ran after its retirement; "
                         "they do not fire it"),
                subject=f"schedule:{key}",
                evidence=capped([ev.schedule(row, face)] + [ev.process(p, face) for p in holders]),
                fix="Redeploy or stop those clocks: they run an old release that still defines the schedule."))
    return findings

def _definitions_differ(facts: Facts) -> list[Finding]:
    """The caller's definitions against the database."""
    face = facts.face
    findings: list[Finding] = []
    if facts.definitions is not None:
        for key, defn in sorted(facts.definitions.items()):
            if not facts.schedule_ok(key):
                continue
            stored = facts.schedules.get(key)
            if stored is None:
                findings.append(Finding(
                    code="leftover-trigger", severity="info",
                    summary=f"schedule {key} is defined in this code but not in the database: no clock with this code "
                            "has started",
                    subject=f"schedule:{key}", fix="Start the clock with this code; it adds the schedule (new "
                                                   "schedules never fire for past instants).",
                    evidence=(ev.note(f"defined: {defn.expression} in "
                                      f"{defn.tz}", key=key, expression=defn.expression, tz=defn.tz),)))
            elif stored["state"] == "retired":
                findings.append(Finding(
                    code="leftover-trigger", severity="warning",
                    summary=f"schedule {key} is defined in this code but retired in the database: a newer release "
                            "removed it",
                    subject=f"schedule:{key}", evidence=(ev.schedule(stored, face),),
                    fix="This code is older than the last clock that synced; deploy the current release everywhere."))
            elif stored["origin"] == "runtime" and stored["code_hash"] == defn.definition_hash():
                findings.append(_runtime_edit(facts, stored, defn))
            elif stored["definition_hash"] != defn.definition_hash():
                findings.append(Finding(
                    code="leftover-trigger", severity="warning",
                    summary=(f"the database holds another definition of {key} ({stored['expression']} in "
                             f"{stored['tz']}, "
                             f"version {stored['version']}) than this code ({defn.expression} in {defn.tz})"),
                    subject=f"schedule:{key}",
                    evidence=(ev.schedule(stored, face),
                              ev.note(f"defined here: {defn.expression} in {defn.tz}, catch-up {defn.catchup}", key=key,
                                      expression=defn.expression, tz=defn.tz, catchup=defn.catchup)),
                    fix="The last clock to sync ran other code: restart the clock with the code you mean to run."))
        for key, stored in sorted(facts.schedules.items()):
            if key not in facts.definitions and stored["state"] != "retired" and facts.schedule_ok(key):
                findings.append(Finding(
                    code="leftover-trigger", severity="warning",
                    summary=f"schedule {key} is active in the database but not defined in this code",
                    subject=f"schedule:{key}", evidence=(ev.schedule(stored, face),),
                    fix=("A clock with other code defines it; a clock started with this code retires it. Make sure "
                         "the code you deploy is the one you inspect.")))
    return findings


def _runtime_edit(facts: Facts, stored: dict[str, Any], defn: ScheduleDef) -> Finding:
    """An operator's run-time edit overriding this very code's definition: what runs, by whom, until when."""
    key = str(stored["key"])
    edits = [e for e in facts.store.read("doctor_events", since=EPOCH, kinds=["schedule.changed"])
             if e["subject"] == f"schedule:{key}" and (e.get("detail") or {}).get("origin") == "runtime"]
    by = f" by {source_text(edits[-1])}" if edits else ""
    operator = Operator.from_detail((edits[-1].get("detail") or {}).get("operator")) if edits else None
    return Finding(
        code="leftover-trigger", severity="info",
        summary=(f"schedule {key} runs a run-time edit (version {stored['version']}: {stored['expression']} in "
                 f"{stored['tz']}{by}{f', operator {operator}' if operator else ''}) that overrides this code's "
                 f"definition ({defn.expression} in {defn.tz})"),
        subject=f"schedule:{key}",
        evidence=capped([ev.schedule(stored, facts.face)] + [ev.event(e, facts.face, str(stored["tz"]))
                                                             for e in edits[-3:]]),
        fix=("Nothing to do if the edit is wanted: it holds until a deploy changes this code's definition. To go "
             f"back to the code's, run `oncebeat schedules set {key}` with the code's values, or deploy the edit "
             "into the code."))


# --- retry-side-effect -----------------------------------------------------------------------------------


def _mail_counts(facts: Facts) -> tuple[Counter[str], Counter[str]]:
    """Messages per effect key (as an app reads it from the message) and per Message-ID in the Maildir
    (empty without one)."""
    by_effect: Counter[str] = Counter()
    by_mid: Counter[str] = Counter()
    for m in facts.messages():
        key = facts.message_effect(m)
        if key:
            by_effect[key] += 1
        if m.message_id:
            by_mid[m.message_id] += 1
    return by_effect, by_mid


def check_retry_side_effect(facts: Facts) -> list[Finding]:
    """Jobs retried or rescued, and what happened to their effects (done once, in doubt, delivered twice)."""
    events = facts.events("job.retried", "job.rescued")
    reconciled = facts.events("effect.reconciled")
    by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_job[int(str(e["subject"]).partition(":")[2])].append(e)
    if not by_job:
        return []
    jobs = facts.load_jobs(by_job)
    effects = facts.effects_of_jobs(by_job)
    by_effect, _ = _mail_counts(facts)
    reconciled_keys = {str(e["subject"]).partition(":")[2]: e for e in reconciled}
    findings: list[Finding] = []
    for jid in sorted(by_job, key=lambda j: by_job[j][0]["id"]):
        rows = by_job[jid]
        job = jobs.get(jid)
        tz = facts.tz_of(facts.occurrence_key(int(job["occurrence_id"]))) if job and job["occurrence_id"] else None
        retried = sum(1 for e in rows if e["kind"] == "job.retried")
        rescued = sum(1 for e in rows if e["kind"] == "job.rescued")
        held = effects.get(jid, [])
        states = Counter(e["state"] for e in held)
        twice = [e for e in held if by_effect.get(e["key"], 0) > 1]
        again = [e for e in held if e["key"] in reconciled_keys
                 and (reconciled_keys[e["key"]].get("detail") or {}).get("outcome") == "not_done"]
        effect_text = _effect_states_text(states)
        if twice:
            verdict = f"; {plural(len(twice), 'effect')} reached the Maildir more than once"
            severity = "error"
        elif states.get("in_doubt"):
            verdict = "; no effect is known to have run twice, but the in-doubt one must be resolved"
            severity = "warning"
        else:
            verdict = "; no effect ran twice" if held else ""
            severity = "info"
        task = job["task"] if job else "?"
        what = " and ".join(x for x in (f"retried {plural(retried, 'time')}" if retried else "",
                                        f"rescued {plural(rescued, 'time')}" if rescued else "") if x)
        summary = f"job {jid} ({task}) was {what}{effect_text}{verdict}"
        items = _retry_evidence(facts, jid, job, rows, held, tz, copies=by_effect, again=again)
        if twice:
            fix = ("An effect reached the outside world twice: see duplicate-delivery for the copies and find the "
                   "resend path (a reconcile that said not_done, or a mail relay retry).")
        elif states.get("in_doubt"):
            fix = "Resolve the in-doubt effect (see in-doubt); retries will not run it blindly."
        else:
            fix = ("Nothing to do: the effect ledger returned the recorded result to the retry instead of running "
                   "the effect again. Look at the errors if retries are frequent.")
        findings.append(Finding(code="retry-side-effect", severity=severity, summary=summary, subject=f"job:{jid}",
                                evidence=capped(items), fix=fix))
        if len(findings) >= MAX_FINDINGS_PER_CHECK:
            break
    return findings


def _effect_states_text(states: Counter[str]) -> str:
    parts = []
    if states.get("done"):
        parts.append(f"{states['done']} done once (later attempts got the recorded result, nothing re-ran)")
    if states.get("in_doubt"):
        parts.append(f"{states['in_doubt']} in doubt")
    if states.get("failed"):
        parts.append(f"{states['failed']} failed (recorded as not having happened)")
    if states.get("started"):
        parts.append(f"{states['started']} started by a live attempt")
    return "; effects: " + ", ".join(parts) if parts else "; no effect was started by this job"


def _retry_evidence(facts: Facts, jid: int, job: dict[str, Any] | None, rows: list[dict[str, Any]],
                    held: list[dict[str, Any]], tz: str | None, *, copies: Counter[str],
                    again: list[dict[str, Any]]) -> list[Evidence]:
    """The job, each retry and rescue, and each effect it holds (with its copies in the Maildir)."""
    face = facts.face
    items: list[Evidence] = ([ev.job(job, face, tz)] if job else [ev.note(f"job {jid} is no longer in the jobs "
                                                                          "table (pruned)")])
    for e in rows:
        d = e.get("detail") or {}
        if e["kind"] == "job.rescued":
            dead = facts.proc(d.get("dead_worker"))
            who = f"{dead.name} pid {dead.pid} on {dead.host}" if dead else f"worker {d.get('dead_worker')}"
            text = (f"rescued after attempt {d.get('attempt')}: {who} stopped heartbeating; job now "
                    f"{d.get('new_state')}")
        else:
            text = f"attempt {d.get('attempt')} failed and will be retried: {str(d.get('error') or '')[:200]}"
        items.append(ev.event(e, face, tz, text=text))
    for e in held:
        in_maildir = facts.maildir is not None and facts.effect_sends_mail(e["key"])
        note = f"{copies.get(e['key'], 0)} copies in the Maildir" if in_maildir else ""
        if e in again:
            note = (note + "; " if note else "") + "re-run after it was reconciled as not done"
        items.append(ev.effect(e, face, facts.proc(e.get("process_id")), tz, note=note))
    return items


# --- in-doubt --------------------------------------------------------------------------------------------


def check_in_doubt(facts: Facts) -> list[Finding]:
    face = facts.face
    rows = [e for e in list_effects(facts.store, state="in_doubt") if facts.effect_ok(e)]
    rows.sort(key=lambda e: (e["started_at"], e["key"]))
    _, by_mid = _mail_counts(facts)
    context = facts.effect_context([e["key"] for e in rows[:MAX_FINDINGS_PER_CHECK]])
    jobs = facts.load_jobs(int(e["job_id"]) for e in rows if e["job_id"] is not None)
    findings: list[Finding] = []
    for e in rows[:MAX_FINDINGS_PER_CHECK]:
        key = e["key"]
        job = jobs.get(int(e["job_id"])) if e["job_id"] is not None else None
        tz = facts.tz_of(facts.occurrence_key(int(job["occurrence_id"]))) if job and job["occurrence_id"] else None
        holder = facts.proc(e.get("process_id"))
        who = f"{holder.name} pid {holder.pid} on {holder.host}" if holder else f"process {e.get('process_id')}"
        items = [ev.effect(e, face, holder, tz)]
        if job:
            items.append(ev.job(job, face, tz))
        if holder:
            items.append(ev.process(holder, face, tz))
        app = context.get(key)
        mid = app.message_id if app else None
        if app:
            items.extend(app.evidence)
        delivered = None
        if facts.maildir is not None and mid:
            delivered = by_mid.get(mid, 0)
            items.append(ev.note(f"the Maildir {facts.maildir} holds {plural(delivered, 'message')} with Message-ID "
                                 f"{mid}",
                                 maildir=str(facts.maildir), message_id=mid, copies=delivered))
        summary = (f"effect {key} is in doubt since {face.text(e['started_at'], tz)}: attempt {e['attempt']} of job "
                   f"{e['job_id']} ({who}) {_why_in_doubt(e.get('detail'))}")
        if job and job["state"] == "in_doubt":
            summary += f"; job {job['id']} waits in_doubt (its other effects ran)"
        if delivered:
            fix = (f"The Maildir shows it was delivered: run `oncebeat effects resolve {key} done`.")
        elif delivered == 0:
            fix = (f"The Maildir has no copy, so it most likely did not happen: after checking the mail server log "
                   f"run `oncebeat effects resolve {key} not_done` to allow one re-run.")
        elif app and app.fix:
            fix = app.fix
        else:
            look = f" (for an email, look for Message-ID {mid} at the mail server)" if mid else ""
            fix = (f"Check whether it happened{look}, then run `oncebeat effects resolve {key} done` if it did or "
                   f"`oncebeat effects resolve {key} not_done` to allow one re-run.")
        findings.append(Finding(code="in-doubt", severity="error", summary=summary, subject=f"effect:{key}",
                                evidence=capped(items), fix=fix))
    if len(rows) > MAX_FINDINGS_PER_CHECK:
        findings.append(Finding(
            code="in-doubt", severity="error", summary=f"{len(rows) - MAX_FINDINGS_PER_CHECK} more effects are in "
                                                       "doubt",
            fix="List them with `oncebeat effects list --state in_doubt` and resolve each.",
            evidence=(ev.note("not shown one by one", more=len(rows) - MAX_FINDINGS_PER_CHECK),)))
    return findings


# --- duplicate-delivery ----------------------------------------------------------------------------------


def check_duplicate_delivery(facts: Facts) -> list[Finding]:
    """One message delivered more than once (Maildir): copies an app names as one message (whatever their
    Message-IDs), then copies sharing a Message-ID."""
    if facts.maildir is None:
        raise Skip("no Maildir given (--maildir DIR): mail evidence not examined")
    if not facts.maildir.is_dir():
        raise Skip(f"Maildir {facts.maildir} does not exist")
    findings: list[Finding] = []
    for label, ms in _duplicate_sets(facts)[:MAX_FINDINGS_PER_CHECK]:
        mids = {m.message_id for m in ms}
        app = facts.group_context(ms)
        items: list[Evidence] = [_message(facts, m) for m in ms] + list(app.evidence if app else ())
        if len(mids) == 1:
            cause = ("all copies carry one Message-ID, so one effect was delivered more than once: a resend of an "
                     "in-doubt effect judged not done, an SMTP retry after a lost reply, or the relay duplicated it")
        else:
            cause = (f"the copies carry {len(mids)} different Message-IDs, so they were separate sends: something "
                     "sent outside this effect ledger (another database, an old version, a manual script)")
        findings.append(Finding(
            code="duplicate-delivery", severity="error",
            summary=f"{label} was delivered {len(ms)} times to {ms[0].to}: {cause}",
            subject=app.subject if app else None, evidence=capped(items),
            fix=app.fix if app and app.fix else (
                "Tell the recipient if needed, then follow the evidence: with one Message-ID check the effect's "
                "history (`oncebeat doctor --explain job ID`); with several, find the other sender and stop it.")))
    return findings


def _duplicate_sets(facts: Facts) -> list[tuple[str, list[Any]]]:
    """(label, copies) of each message delivered more than once, app-named groups first."""
    groups: dict[str, list[Any]] = defaultdict(list)
    by_mid: dict[str, list[Any]] = defaultdict(list)
    for m in facts.messages():
        label = facts.message_group(m)
        if label:
            groups[label].append(m)
        if m.message_id:
            by_mid[m.message_id].append(m)
    dup_sets: list[tuple[str, list[Any]]] = []
    seen: set[str] = set()
    for label, ms in groups.items():
        if len(ms) > 1:
            dup_sets.append((label, ms))
            seen |= {m.key for m in ms}
    for mid, ms in by_mid.items():
        if len(ms) > 1 and not {m.key for m in ms} <= seen:
            dup_sets.append((f"Message-ID {mid}", ms))
            seen |= {m.key for m in ms}
    return dup_sets


def _message(facts: Facts, m: Any, tz: str | None = None) -> Evidence:
    text, data = facts.message_fields(m)
    return ev.message(m, facts.face, tz, app_text=text, app_data=data)


# --- lost ------------------------------------------------------------------------------------------------


def check_lost(facts: Facts) -> list[Finding]:
    """The engine's losses: occurrences without a job, jobs past their lease, due jobs nobody claims; jobs a pause
    holds are neither lost nor late (an ``info`` finding says what holds them and how to release them).

    (An app adds its own part of ``lost``: its work that nothing will do.)
    """
    return _occurrences_without_job(facts) + _expired_leases(facts) + _unclaimed_jobs(facts) + _held_by_pause(facts)


def _occurrences_without_job(facts: Facts) -> list[Finding]:
    """Occurrences that should have a job and have none: they never ran."""
    face = facts.face
    findings: list[Finding] = []
    occs = [o for o in facts.store.read("doctor_occurrences_without_job", since=facts.since) if facts.occurrence_ok(o)]
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in occs:
        by_key[str(o["schedule_key"])].append(o)
    for key, rows in sorted(by_key.items()):
        findings.append(Finding(
            code="lost", severity="error",
            summary=(f"{plural(len(rows), 'occurrence')} of {key} recorded as "
                     f"{'/'.join(sorted({r['outcome'] for r in rows}))} "
                     f"with no job (first at {face.text(rows[0]['fire_at'], str(rows[0]['tz']))}): they never ran"),
            subject=f"schedule:{key}", evidence=capped(ev.occurrence(o, face) for o in rows),
            fix=(f"Something wrote the ledger without enqueueing (an old version or a hand-made insert; see the "
                 f"source). Run `oncebeat trigger {key}` to run it now.")))
    return findings


def _expired_leases(facts: Facts) -> list[Finding]:
    """Running jobs whose lease expired: their worker died (an error once no worker rescues them)."""
    face = facts.face
    now = facts.now
    findings: list[Finding] = []
    expired = [j for j in facts.store.read("doctor_expired_leases", now=now) if facts.job_ok(j)]
    if expired:
        stuck = [j for j in expired if now - j["lease_expires_at"] > LEASE_RESCUE_EXPECTED]
        items = []
        for j in expired:
            items.append(ev.job(j, face, note=f"lease expired "
                                              f"{duration_text((now - j['lease_expires_at']).total_seconds())} ago"))
            p = facts.proc(j.get("worker_id"))
            if p:
                items.append(ev.process(p, face))
        findings.append(Finding(
            code="lost", severity="error" if stuck else "warning",
            summary=(f"{plural(len(expired), 'job')} still marked running past the lease (oldest expired "
                     f"{face.text(expired[0]['lease_expires_at'])}): their worker died"
                     + ("; no worker has rescued them" if stuck else "")),
            subject=f"job:{expired[0]['id']}", evidence=capped(items),
            fix=("Start a worker: workers rescue expired leases every 15 s and the jobs run again (effects already "
                 "done are not repeated)." if stuck else
                 "Nothing to do yet: the next rescue (every 15 s in any worker) puts them back in the queue.")))
    return findings


def _unclaimed_jobs(facts: Facts) -> list[Finding]:
    """Due jobs that nobody claims: no worker takes their queue."""
    face = facts.face
    now = facts.now
    findings: list[Finding] = []
    overdue = [j for j in facts.store.read("doctor_overdue_jobs", before=now - OVERDUE_AFTER, limit=1000)
               if facts.job_ok(j)]
    if overdue:
        queues = Counter(str(j["queue"]) for j in overdue)
        workers = [p for p in facts.processes() if p.role == "worker" and p.alive_at(now)]
        items = [ev.job(j, face) for j in overdue] + [ev.process(p, face) for p in workers]
        findings.append(Finding(
            code="lost", severity="warning",
            summary=(f"{plural(len(overdue), 'job')} due for more than {duration_text(OVERDUE_AFTER.total_seconds())} "
                     f"and not claimed (queues: {', '.join(f'{q} {n}' for q, n in sorted(queues.items()))}); "
                     f"{plural(len(workers), 'worker')} alive"),
            subject=f"job:{overdue[0]['id']}", evidence=capped(items, total=len(overdue) + len(workers)),
            fix="Start workers for those queues (`oncebeat worker --queue NAME`); jobs wait, they are not lost."))
    return findings


def _held_by_pause(facts: Facts) -> list[Finding]:
    """Jobs a pause holds (a paused queue, a paused schedule's queued runs): waiting for a resume, not lost."""
    findings: list[Finding] = []
    for h in held_jobs(facts.store):
        if h.kind == "schedule" and not facts.schedule_ok(h.name):
            continue
        resume = f"oncebeat {'queues' if h.kind == 'queue' else 'schedules'} resume {h.name}"
        findings.append(Finding(
            code="lost", severity="info",
            summary=(f"{plural(h.n, 'job')} of queue {h.queue} held: {h.describe()}; they are not lost and not "
                     "late: no worker takes them until the pause ends"),
            subject=f"{h.kind}:{h.name}",
            fix=f"`{resume}` releases them (each runs once); leave it paused to keep holding them."))
    return findings


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
        if _period(sched, facts.now) >= timedelta(hours=20):
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


# --- discarded -------------------------------------------------------------------------------------------


def check_discarded(facts: Facts) -> list[Finding]:
    face = facts.face
    rows = [j for j in facts.store.read("doctor_discarded_jobs", since=facts.since) if facts.job_ok(j)]
    findings: list[Finding] = []
    context = facts.job_context(rows[:MAX_FINDINGS_PER_CHECK])
    occs = facts.load_occurrences(int(j["occurrence_id"]) for j in rows if j["occurrence_id"] is not None)
    events = {str(e["subject"]): e for e in facts.events("job.discarded", "job.rescued")}
    for j in rows[:MAX_FINDINGS_PER_CHECK]:
        err = ev.last_error(j) or {}
        occ = occs.get(int(j["occurrence_id"])) if j["occurrence_id"] is not None else None
        tz = str(occ["tz"]) if occ else None
        items = [ev.job(j, face, tz)]
        for e in (j.get("errors") or [])[-5:]:
            when = _parse_iso(e.get("at"))
            items.append(ev.note(f"attempt {e.get('attempt')} failed {face.text(when, tz) if when else e.get('at')} "
                                 f"({e.get('kind')}): {str(e.get('error') or '')[:300]}",
                                 **{k: e.get(k) for k in ("attempt", "at", "kind", "error")}))
        if occ:
            items.append(ev.occurrence(occ, face))
        app = context.get(int(j["id"]))
        if app:
            items.extend(app.evidence)
        if f"job:{j['id']}" in events:
            last = events[f"job:{j['id']}"]
            d = last.get("detail") or {}
            text = (f"gave up after attempt {d.get('attempt')}" + (" (permanent error)" if d.get("permanent") else "")
                    if last["kind"] == "job.discarded" else
                    f"rescued after attempt {d.get('attempt')} with no attempts left: now {d.get('new_state')}")
            items.append(ev.event(last, face, tz, text=text))
        kind = err.get("kind")
        if kind == "in_doubt":
            fix = ("Resolve the effect (see in-doubt); the job gave up rather than repeat an effect that may have "
                   "happened.")
        elif kind == "effect_conflict":
            fix = ("A programming error: one effect key was used for two different payloads (see effect-conflict). "
                   "Make the key name exactly one effect (include what differs in it); the job's other effects ran.")
        elif kind == "unknown_task":
            fix = f"Deploy workers that register task {j['task']}, then enqueue the work again."
        elif kind == "rescue":
            fix = ("Its workers kept dying while running it (killed, out of memory, past the grace period): find why "
                   "before enqueueing it again.")
        else:
            fix = ("Fix the cause named in the last error, then enqueue the work again"
                   + (f"; {app.fix}." if app and app.fix else "."))
        first = str(err.get("error") or "no error recorded").strip().splitlines()
        findings.append(Finding(
            code="discarded", severity="error",
            summary=(f"job {j['id']} ({j['task']}) gave up after {plural(int(j['attempt']), 'attempt')} at "
                     f"{face.text(j['finished_at'], tz)}: {(first[-1] if first else '')[:200]}"),
            subject=f"job:{j['id']}", evidence=capped(items), fix=fix))
    if len(rows) > MAX_FINDINGS_PER_CHECK:
        findings.append(Finding(
            code="discarded", severity="error", summary=f"{len(rows) - MAX_FINDINGS_PER_CHECK} more jobs were "
                                                        "discarded",
            fix="List them with `oncebeat jobs --state discarded`.",
            evidence=(ev.note("not shown one by one", more=len(rows) - MAX_FINDINGS_PER_CHECK),)))
    return findings


# --- effect-conflict -------------------------------------------------------------------------------------


def check_effect_conflict(facts: Facts) -> list[Finding]:
    """Effect keys reused with another payload (``effect.conflict`` events): a bug, recorded, never retried."""
    face = facts.face
    rows = facts.events("effect.conflict")
    effects = {str(e["key"]): e for e in facts.effects_by_keys([str(r["detail"].get("key")) for r in rows])}
    jobs = facts.load_jobs(int(r["detail"]["job_id"]) for r in rows if r["detail"].get("job_id") is not None)
    findings: list[Finding] = []
    for r in rows[:MAX_FINDINGS_PER_CHECK]:
        d = r.get("detail") or {}
        key = str(d.get("key"))
        items = [ev.event(r, face, text=(f"effect key {key} reused with payload hash {d.get('payload_hash')}; "
                                          f"first used with {d.get('first_payload_hash')}"))]
        if key in effects:
            items.append(ev.effect(effects[key], face, facts.proc(effects[key].get("process_id"))))
        job = jobs.get(int(d["job_id"])) if d.get("job_id") is not None else None
        if job:
            items.append(ev.job(job, face))
        findings.append(Finding(
            code="effect-conflict", severity="error",
            summary=(f"effect key {key} was reused with another payload at {face.text(r['at'])}"
                     + (f" by job {d.get('job_id')} attempt {d.get('attempt')}" if d.get("job_id") else "")
                     + f" (payload hash {d.get('payload_hash')}, first {d.get('first_payload_hash')}): "
                       "that effect was not run; the job's other effects were"),
            subject=f"effect:{key}", evidence=capped(items),
            fix=("A key must name exactly one effect: put what differs (e.g. the recipient or the amount) into "
                 "the key, or keep the payload the same. Then enqueue the work again if the second effect is "
                 "still wanted.")))
    if len(rows) > MAX_FINDINGS_PER_CHECK:
        findings.append(Finding(
            code="effect-conflict", severity="error",
            summary=f"{len(rows) - MAX_FINDINGS_PER_CHECK} more effect keys were reused with another payload",
            fix="List them with the audit events of kind effect.conflict.",
            evidence=(ev.note("not shown one by one", more=len(rows) - MAX_FINDINGS_PER_CHECK),)))
    return findings


_ENGINE_CHECKS: tuple[tuple[str, Callable[[Facts], list[Finding]], str], ...] = (
    ("multiple-clocks", check_multiple_clocks, "clock processes alive at once; duplicate fires the ledger rejected"),
    ("clock-restart", check_clock_restart, "clock restarts near fire instants and the catch-up decisions"),
    ("leftover-trigger", check_leftover_trigger, "fires and jobs from outside the clock, old versions, retired "
                                                 "schedules"),
    ("retry-side-effect", check_retry_side_effect, "retries and rescues, and what happened to their effects"),
    ("in-doubt", check_in_doubt, "effects in doubt, oldest first, with how to resolve each"),
    ("effect-conflict", check_effect_conflict, "effect keys reused with another payload"),
    ("duplicate-delivery", check_duplicate_delivery, "one message delivered twice (Maildir)"),
    ("lost", check_lost, "occurrences without a job, expired leases, unclaimed jobs"),
    ("timezone", check_timezone, "process TZ against schedule zones, two fires on one date, DST moves"),
    ("clock-skew", check_clock_skew, "process clocks ahead of the PostgreSQL server's"),
    ("discarded", check_discarded, "jobs that gave up, with their last error"),
)
"""The engine's checks as (code, function, title), in run order (orders 10, 20, …; apps place theirs between)."""

for _n, (_code, _fn, _title) in enumerate(_ENGINE_CHECKS, start=1):
    register_check(_code, _fn, title=_title, order=10 * _n)
