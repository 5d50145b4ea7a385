"""The full story of one occurrence or job (or a thing an app registers), in order, from its rows and the audit trail.

Each line starts with the instant (local time in the schedule's zone and UTC)
and says who did what. The first lines describe the thing as it is now.

Example::

    for line in explain(store, "job", 42):
        print(line)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .. import ledger, processes
from ..errors import OncebeatError
from ..queue import job_row
from ..schedules import Schedule
from ..store import Store
from . import registry
from .checks.common import parse_iso
from .dst import fates, transitions
from .facts import source_text
from .model import Timeface, duration_text

__all__ = ["explain", "explain_kinds", "numeric_kind", "Story", "job_entries", "default_tz", "MAX_RELATED",
           "CREATED", "RESCUED", "CLAIMED", "EFFECT_START", "EFFECT_END", "FAILED", "GAVE_UP", "FINISHED"]

MAX_RELATED = 20
# Lines stamped with the same instant are told in causal order:
CREATED, RESCUED, CLAIMED, EFFECT_START, EFFECT_END, FAILED, GAVE_UP, FINISHED = range(8)


@dataclass
class Story:
    """A story being told: header lines (the thing now), then dated entries sorted by instant and rank."""

    face: Timeface
    tz: str | None
    header: list[str] = field(default_factory=list)
    entries: list[tuple[datetime, int, str]] = field(default_factory=list)

    def add(self, at: datetime | None, text: str, rank: int = FAILED) -> None:
        """Add a line at ``at``; ``rank`` orders lines of one instant by cause (``CREATED`` … ``FINISHED``)."""
        if at is not None:
            self.entries.append((at, rank * 1_000_000 + len(self.entries), text))

    def lines(self) -> list[str]:
        ordered = sorted(self.entries, key=lambda e: (e[0], e[1]))
        return self.header + [f"{self.face.text(at, self.tz)}  {text}" for at, _, text in ordered]


def explain(store: Store, kind: str, id_or_number: int | str) -> list[str]:
    """Tell the story of one thing, oldest first.

    Args:
        kind: ``"occurrence"`` or ``"job"`` (``id_or_number`` is the numeric id), or a kind an app
            registers (:func:`~oncebeat.doctor.registry.register_explain`; see :func:`explain_kinds`).
    Returns:
        Lines: a few describing the thing now, then one per event in time order, each
        starting with its instant in local time and UTC.
    Raises:
        OncebeatError: unknown kind, an id that is not a number, or no such thing.
    """
    kinds = registry.explain_kinds()
    if kind not in kinds:
        raise OncebeatError(f"explain: kind must be one of {', '.join(kinds)}, not {kind!r}")
    found = kinds[kind]
    if found.numeric and not str(id_or_number).strip().isdigit():
        raise OncebeatError(f"explain {kind}: {id_or_number!r} is not a numeric id")
    if found.sql_line is not None and found.sql_line not in store.schema_versions():
        raise OncebeatError(f"explain {kind}: this database has no tables of the {found.sql_line!r} SQL line")
    return found.fn(store, str(id_or_number).strip())


def explain_kinds() -> tuple[str, ...]:
    """The kinds :func:`explain` knows: the engine's ``occurrence`` and ``job``, then those apps registered."""
    return tuple(registry.explain_kinds())


def numeric_kind(kind: str) -> bool:
    """Whether ``kind``'s ids are whole numbers (False for an unknown kind)."""
    found = registry.explain_kinds().get(kind)
    return bool(found and found.numeric)


def default_tz(store: Store) -> str:
    """The one zone of the active schedules, else UTC (for stories not about one schedule)."""
    zones = {r["tz"] for r in ledger.list_schedules(store) if r["state"] != "retired"}
    return str(zones.pop()) if len(zones) == 1 else "UTC"


def _occurrence_row(store: Store, occurrence_id: int) -> dict[str, Any] | None:
    return ledger.get_occurrence(store, occurrence_id)


# --- occurrence --------------------------------------------------------------------------------------------


def _occurrence(store: Store, occurrence_id: int) -> list[str]:
    o = _occurrence_row(store, occurrence_id)
    if o is None:
        raise OncebeatError(f"no occurrence {occurrence_id}")
    tz = str(o["tz"])
    story = Story(face=Timeface(tz), tz=tz)
    face = story.face
    story.header.append(f"occurrence {o['id']} of schedule {o['schedule_key']}: fire instant "
                        f"{face.text(o['fire_at'], tz)}, "
                        f"business date {o['business_date']}, outcome {o['outcome']}"
                        + (f", job {o['job_id']}" if o["job_id"] else ", no job")
                        + (f" (tzdata {o['tzdata_version']})" if o.get("tzdata_version") else ""))
    s = ledger.get_schedule(store, o["schedule_key"])
    if s is not None:
        story.header.append(f"schedule {s['key']} now: {s['expression']} in {s['tz']} (DST: gap {s['dst_gap']}, fold "
                            f"{s['dst_fold']}), catch-up {s['catchup']}, {s['state']}, version {s['version']} since "
                            f"{face.text(s['active_since'], s['tz'])}")
        story.header.extend(_dst_lines(s, o))
    story.add(o["created_at"], f"recorded {o['outcome']} by {source_text(o)}", CREATED)
    for e in store.read("doctor_events_about_occurrence", subject=f"schedule:{o['schedule_key']}",
                        fire_at_iso=o["fire_at"].isoformat(), occurrence_id=o["id"], created_at=o["created_at"]):
        d = e.get("detail") or {}
        if e["kind"] == "occurrence.duplicate_rejected":
            story.add(e["at"], f"{source_text(e)} tried to record it again ({d.get('attempted')}): rejected by the "
                               "ledger, no job enqueued")
        elif e["kind"] == "clock.catchup":
            story.add(e["at"], f"catch-up decision by {source_text(e)}: {d.get('summary')}", CREATED)
        elif not e["kind"].startswith("occurrence."):
            story.add(e["at"], f"{e['kind']} by {source_text(e)}: {json.dumps(d, default=str)}")
    if o["job_id"]:
        job = job_row(store, o["job_id"])
        if job is not None:
            job_entries(store, story, job, prefix=f"job {o['job_id']}: ")
        else:
            story.header.append(f"job {o['job_id']} is no longer in the jobs table (pruned after it finished)")
    spawned = [j for j in store.read("doctor_jobs_of_occurrences", ids=[o["id"]]) if j["id"] != o["job_id"]]
    for j in spawned[:MAX_RELATED]:
        story.add(j["created_at"], f"job {j['id']} ({j['task']}) enqueued for this occurrence by {source_text(j)}"
                                   + ("" if j["finished_at"] else f"; now {j['state']}"), EFFECT_START)
        if j["finished_at"]:
            story.add(j["finished_at"], f"job {j['id']} ({j['task']}) {j['state']}", FINISHED)
    if len(spawned) > MAX_RELATED:
        story.header.append(f"{len(spawned)} jobs were enqueued for this occurrence; the first {MAX_RELATED} are "
                            "shown")
    for h in registry.hooks(store.schema_versions()):
        entries, header = h.occurrence_story(store, o)
        story.header.extend(header)
        for at, rank, text in entries:
            story.add(at, text, rank)
    return story.lines()


def _dst_lines(s: dict[str, Any], o: dict[str, Any]) -> list[str]:
    """If the occurrence's instant was chosen by a DST rule, say which."""
    if s["tz"] != o["tz"]:
        return [f"note: the occurrence was recorded under zone {o['tz']}; the schedule is now in {s['tz']}"]
    try:
        sched = Schedule(expression=s["expression"], tz=s["tz"], dst_gap=s["dst_gap"], dst_fold=s["dst_fold"])
    except OncebeatError:
        return []
    out = []
    for tr in transitions(s["tz"], o["fire_at"] - timedelta(days=1), o["fire_at"] + timedelta(days=1)):
        for w in fates(sched, tr):
            if o["fire_at"] in w.instants:
                out.append(f"DST: {tr.describe()}; wall time {w.wall:%H:%M}: {w.rule}")
    return out


# --- job ---------------------------------------------------------------------------------------------------


def _job_story(store: Store, job_id: int) -> list[str]:
    j = job_row(store, job_id)
    if j is None:
        raise OncebeatError(f"no job {job_id}: it never existed or was pruned after it finished")
    tz = None
    occ = _occurrence_row(store, int(j["occurrence_id"])) if j["occurrence_id"] is not None else None
    if occ is not None:
        tz = str(occ["tz"])
    tz = tz or default_tz(store)
    story = Story(face=Timeface(tz), tz=tz)
    story.header.append(f"job {j['id']} ({j['task']}) in queue {j['queue']}: {j['state']}, attempt {j['attempt']}/"
                        f"{j['max_attempts']}, args {json.dumps(j['args'], sort_keys=True, default=str)}"
                        + (f", unique key {j['unique_key']}" if j["unique_key"] else ""))
    if occ is not None:
        story.header.append(f"caused by occurrence {occ['id']} of {occ['schedule_key']} at "
                            f"{story.face.text(occ['fire_at'], tz)} ({occ['outcome']}, business date "
                            f"{occ['business_date']})")
    job_entries(store, story, j, prefix="")
    return story.lines()


def _procs(store: Store) -> dict[int, dict[str, Any]]:
    return {int(p["id"]): p for p in processes.list_processes(store)}


def _proc_text(procs: dict[int, dict[str, Any]], pid: Any) -> str:
    p = procs.get(int(pid)) if isinstance(pid, int) else None
    return f"worker {pid} ({p['name']} pid {p['pid']} on {p['host']})" if p else f"worker {pid}"


def job_entries(store: Store, story: Story, j: dict[str, Any], *, prefix: str) -> None:
    """Add a job's life to ``story``: enqueued, attempts, retries and rescues, its effects, its end."""
    procs = _procs(store)
    face = story.face
    story.add(j["created_at"], f"{prefix}enqueued by {source_text(j)}"
                               + (f" for occurrence {j['occurrence_id']}" if j["occurrence_id"] is not None else ""),
              CREATED)
    for e in j.get("errors") or []:
        at = parse_iso(e.get("at"))
        style = RESCUED if e.get("kind") == "rescue" else FAILED
        story.add(at or j["created_at"], f"{prefix}attempt {e.get('attempt')} failed ({e.get('kind')}): "
                                         f"{_last_line(e.get('error'))}", style)
    events = store.read("doctor_events_for_subjects", subjects=[f"job:{j['id']}"])
    events += store.read("doctor_events_returning_job", job_id=j["id"])
    for e in events:
        d = e.get("detail") or {}
        if e["kind"] == "job.retried":
            when = (f"retry scheduled in {duration_text(float(d['retry_in']))}" if d.get("retry_in") is not None
                    else "put back to run now")  # an operator's retry has no backoff
            story.add(e["at"], f"{prefix}{when} (by {source_text(e)})", FAILED)
        elif e["kind"] == "job.rescued":
            story.add(e["at"], f"{prefix}rescued by {source_text(e)}: {_proc_text(procs, d.get('dead_worker'))} "
                               f"stopped heartbeating during attempt {d.get('attempt')}; now {d.get('new_state')}",
                      RESCUED)
        elif e["kind"] == "job.discarded":
            story.add(e["at"], f"{prefix}gave up (discarded) after attempt {d.get('attempt')}"
                               + (" (permanent error)" if d.get("permanent") else ""), GAVE_UP)
        elif e["kind"] == "job.in_doubt":
            story.add(e["at"], f"{prefix}waits in doubt after attempt {d.get('attempt')} (its other effects ran): "
                               f"resolve {', '.join(map(str, d.get('keys') or []))} with `oncebeat effects resolve "
                               "KEY done|not_done`", GAVE_UP)
        elif e["kind"] == "job.rerun":
            story.add(e["at"], f"{prefix}runs again: effect {d.get('effect')} resolved not_done by {source_text(e)}"
                               + (f" (a copy of job {d.get('copy_of')})" if d.get("copy_of") else ""), FAILED)
        elif e["kind"] == "job.cancelled":
            story.add(e["at"], f"{prefix}cancelled by {source_text(e)}", GAVE_UP)
        elif e["kind"] == "job.returned":
            story.add(e["at"], f"{prefix}given back to the queue at shutdown by {source_text(e)} (no attempt used)",
                      FAILED)
        else:
            story.add(e["at"], f"{prefix}{e['kind']} by {source_text(e)}")
    if j["started_at"] is not None:
        story.add(j["started_at"], f"{prefix}claimed for attempt {j['attempt']} by {_proc_text(procs, j['worker_id'])}"
                                   + (f", lease until {face.text(j['lease_expires_at'], story.tz)}"
                                      if j["lease_expires_at"] else ""), CLAIMED)
    effects = store.read("doctor_effects_of_jobs", ids=[j["id"]])
    if isinstance(j.get("unique_key"), str):  # a job keyed by its effect (one job per effect): earlier jobs' tries too
        known = {e["key"] for e in effects}
        effects += [e for e in store.read("doctor_effects_by_keys", keys=[j["unique_key"]]) if e["key"] not in known]
    for e in effects:
        _effect_entries(store, story, e, prefix=prefix, procs=procs)
    if j["finished_at"] is not None:
        story.add(j["finished_at"], f"{prefix}{j['state']}", FINISHED)


def _effect_entries(store: Store, story: Story, e: dict[str, Any], *, prefix: str,
                    procs: dict[int, dict[str, Any]]) -> None:
    story.add(e["started_at"], f"{prefix}effect {e['key']} started by job {e['job_id']} attempt {e['attempt']} "
                               f"({_proc_text(procs, e['process_id'])})", EFFECT_START)
    events = store.read("doctor_events_for_subjects", subjects=[f"effect:{e['key']}"])
    marked = any(ev["kind"] == "effect.in_doubt" for ev in events)
    if e["finished_at"] is not None and not (e["state"] == "in_doubt" and marked):
        story.add(e["finished_at"], f"{prefix}effect {e['key']} {e['state']}"
                                    + (f": {e['detail']}" if e.get("detail") else "")
                                    + (f" (result {json.dumps(e['result'], default=str)[:200]})"
                                       if e["state"] == "done" and e.get("result") is not None else ""), EFFECT_END)
    elif e["state"] == "started":
        story.header.append(f"effect {e['key']} is started and not finished: a live attempt holds it, or it died "
                            "(the next attempt marks it in doubt)")
    for ev in events:
        d = ev.get("detail") or {}
        if ev["kind"] == "effect.in_doubt":
            story.add(ev["at"], f"{prefix}effect {e['key']} marked in doubt by {source_text(ev)}: {d.get('detail')}",
                      EFFECT_END)
        elif ev["kind"] == "effect.reconciled":
            story.add(ev["at"], f"{prefix}effect {e['key']} reconciled {d.get('outcome')}"
                                + (" by an operator" if d.get("by") == "operator" else " by the reconcile hook")
                                + f" ({source_text(ev)})", EFFECT_END)
        else:
            story.add(ev["at"], f"{prefix}{ev['kind']} on effect {e['key']} by {source_text(ev)}", EFFECT_END)
    if e["state"] == "in_doubt":
        story.header.append(f"effect {e['key']} is in doubt: check the outside world, then `oncebeat effects resolve "
                            f"{e['key']} done|not_done`")


def _last_line(value: Any) -> str:
    """The telling line of an error: the last line of a traceback, else the first line."""
    lines = str(value or "").strip().splitlines()
    if not lines:
        return "(no message)"
    return (lines[-1] if lines[0].startswith("Traceback") else lines[0])[:300]


registry.register_explain("occurrence", lambda store, ident: _occurrence(store, int(ident)), numeric=True,
                          help="an occurrence of a schedule, by id")
registry.register_explain("job", lambda store, ident: _job_story(store, int(ident)), numeric=True,
                          help="a job, by id")
