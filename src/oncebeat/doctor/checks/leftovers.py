"""The ``leftover-trigger`` check: fires and jobs from outside the clock, old versions, retired and edited schedules."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...app import ScheduleDef
from ...provenance import Operator
from .. import evidence as ev
from .. import manual
from ..facts import EPOCH, Facts, source_text, version_key
from ..model import Finding
from .common import OLD_VERSION_GRACE, capped, dup_evidence, plural

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
            subject=f"schedule:{key}", evidence=capped(dup_evidence(facts, d) for d in rows),
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
