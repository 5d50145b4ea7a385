"""Checks of the clock processes: ``multiple-clocks`` and ``clock-restart``."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any

from ... import ledger
from .. import evidence as ev
from ..facts import Facts, Proc, source_text
from ..model import Evidence, Finding, duration_text
from .common import HANDOVER_GRACE, RESTART_WINDOW, _clocks, capped, dup_evidence, period_of, plural

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
        items = [ev.process(p, face) for p in group] + overlaps + [dup_evidence(facts, d) for d in rejected]
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
            subject=str(rows[0]["subject"]), evidence=capped(dup_evidence(facts, d) for d in rows),
            fix=("Find and stop the second clock on that host; only one clock should run. Nothing ran twice: the "
                 "ledger rejected each duplicate.")))
    return findings


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


# --- clock-restart ---------------------------------------------------------------------------------------


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
            if sched is None or period_of(sched, facts.now) < timedelta(hours=1):
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
