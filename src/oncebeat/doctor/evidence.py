"""Evidence builders: one function per kind of fact, so every finding shows rows the same way.

Each returns an :class:`~oncebeat.doctor.model.Evidence` whose ``text`` reads
as one line and whose ``data`` holds the fields documented in ``docs/doctor.md``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..mail.maildir import StoredMessage
from .facts import Proc, message_date, source_of, source_text
from .model import Evidence, Timeface, duration_text

__all__ = ["process", "occurrence", "job", "effect", "event", "message", "schedule", "note",
           "measurement", "transition", "last_error"]


def process(p: Proc, face: Timeface, tz: str | None = None) -> Evidence:
    if p.stopped_at is not None:
        life = f"stopped {face.text(p.stopped_at, tz)}"
    else:
        life = f"not stopped, last seen {face.text(p.last_seen, tz)}"
    text = (f"{p.label()}, started {face.text(p.started_at, tz)}, {life}"
            + (f", TZ={p.tz_env}" if p.tz_env else ""))
    return Evidence(kind="process", text=text, data={
        "id": p.id, "role": p.role, "host": p.host, "pid": p.pid, "name": p.name, "version": p.version,
        "tz_env": p.tz_env, "started_at": face.json(p.started_at, tz), "last_seen_at": face.json(p.last_seen, tz),
        "stopped_at": face.json(p.stopped_at, tz), "schedules": p.schedules()})


def occurrence(o: dict[str, Any], face: Timeface, *, note: str = "") -> Evidence:
    tz = str(o["tz"])
    job_text = f", job {o['job_id']}" if o.get("job_id") else ", no job"
    text = (f"occurrence {o['id']} of {o['schedule_key']} at {face.text(o['fire_at'], tz)}: {o['outcome']}"
            f"{job_text}; recorded {face.text(o['created_at'], tz)} by "
            f"{source_text(o)}" + (f"; {note}" if note else ""))
    return Evidence(kind="occurrence", text=text, data={
        "id": o["id"], "schedule": o["schedule_key"], "fire_at": face.json(o["fire_at"], tz), "outcome": o["outcome"],
        "tz": tz, "business_date": o["business_date"], "job_id": o.get("job_id"), "source": source_of(o),
        "created_at": face.json(o["created_at"], tz)})


def last_error(j: dict[str, Any]) -> dict[str, Any] | None:
    errors = j.get("errors") or []
    return dict(errors[-1]) if errors else None


def job(j: dict[str, Any], face: Timeface, tz: str | None = None, *, note: str = "") -> Evidence:
    err = last_error(j)
    parts = [f"job {j['id']} ({j['task']}) {j['state']}, attempt {j['attempt']}/{j['max_attempts']}",
             f"enqueued {face.text(j['created_at'], tz)} by {source_text(j)}"]
    if j.get("occurrence_id") is not None:
        parts.append(f"occurrence {j['occurrence_id']}")
    if j["state"] == "running":
        parts.append(f"worker {j['worker_id']}, lease until {face.text(j['lease_expires_at'], tz)}")
    elif j["state"] in ("available", "scheduled", "retryable"):
        parts.append(f"due {face.text(j['run_at'], tz)}")
    if j.get("finished_at") is not None:
        parts.append(f"finished {face.text(j['finished_at'], tz)}")
    if err:
        parts.append(f"last error (attempt {err.get('attempt')}, {err.get('kind')}): {_first_line(err.get('error'))}")
    if note:
        parts.append(note)
    return Evidence(kind="job", text="; ".join(parts), data={
        "id": j["id"], "task": j["task"], "state": j["state"], "attempt": j["attempt"],
        "max_attempts": j["max_attempts"], "queue": j["queue"], "occurrence_id": j.get("occurrence_id"),
        "worker_id": j.get("worker_id"), "source": source_of(j), "created_at": face.json(j["created_at"], tz),
        "run_at": face.json(j["run_at"], tz), "lease_expires_at": face.json(j.get("lease_expires_at"), tz),
        "finished_at": face.json(j.get("finished_at"), tz), "last_error": err})


def effect(e: dict[str, Any], face: Timeface, holder: Proc | None = None, tz: str | None = None, *,
           note: str = "") -> Evidence:
    who = (f"worker {holder.name} pid {holder.pid} on {holder.host}" if holder is not None
           else f"{e['source_name']} pid {e['source_pid']} on {e['source_host']}")
    text = (f"effect {e['key']} {e['state']}: job {e['job_id']} attempt {e['attempt']} ({who}) started it "
            f"{face.text(e['started_at'], tz)}"
            + (f", finished {face.text(e['finished_at'], tz)}" if e.get("finished_at") else "")
            + (f"; {e['detail']}" if e.get("detail") else "") + (f"; {note}" if note else ""))
    return Evidence(kind="effect", text=text, data={
        "key": e["key"], "state": e["state"], "job_id": e["job_id"], "attempt": e["attempt"],
        "process_id": e["process_id"], "host": holder.host if holder else e["source_host"],
        "pid": holder.pid if holder else e["source_pid"], "started_at": face.json(e["started_at"], tz),
        "finished_at": face.json(e.get("finished_at"), tz), "detail": e.get("detail")})


def event(ev: dict[str, Any], face: Timeface, tz: str | None = None, *, text: str | None = None) -> Evidence:
    detail = dict(ev.get("detail") or {})
    line = text or f"{ev['kind']} on {ev['subject']}: {_detail_text(detail)}"
    return Evidence(kind="event", text=f"{face.text(ev['at'], tz)}: {line} (event {ev['id']}, {source_text(ev)})",
                    data={"id": ev["id"], "event": ev["kind"], "subject": ev["subject"], "at": face.json(ev["at"], tz),
                          "process_id": ev.get("process_id"), "source": source_of(ev), "detail": detail})


def message(m: StoredMessage, face: Timeface, tz: str | None = None, *, app_text: str = "",
            app_data: dict[str, Any] | None = None) -> Evidence:
    """A delivered message; ``app_text``/``app_data`` are what an app reads from its headers
    (:meth:`~oncebeat.doctor.registry.Hooks.message_fields`)."""
    when = message_date(m)
    text = (f"Maildir message {m.key}: Message-ID {m.message_id or '(none)'}, to {m.to}{app_text}"
            + (f", dated {face.text(when, tz)}" if when else ""))
    return Evidence(kind="message", text=text, data={
        "maildir_key": m.key, "message_id": m.message_id, "to": m.to, "subject": m.subject, **(app_data or {}),
        "date": face.json(when, tz)})


def schedule(row: dict[str, Any], face: Timeface) -> Evidence:
    text = (f"schedule {row['key']}: {row['expression']} in {row['tz']} (DST: gap {row['dst_gap']}, fold "
            f"{row['dst_fold']}), catch-up {row['catchup']} within {duration_text(float(row['catchup_window']))}, "
            f"{row['state']}, version {row['version']} since {face.text(row['active_since'], row['tz'])}")
    return Evidence(kind="schedule", text=text, data={
        "key": row["key"], "expression": row["expression"], "tz": row["tz"], "dst_gap": row["dst_gap"],
        "dst_fold": row["dst_fold"], "catchup": row["catchup"], "catchup_window": float(row["catchup_window"]),
        "state": row["state"], "version": row["version"], "active_since": face.json(row["active_since"], row["tz"]),
        "updated_at": face.json(row["updated_at"], row["tz"])})


def measurement(*, text: str, what: str, value_seconds: float, at: datetime | None, reference: datetime | None,
                face: Timeface, **extra: Any) -> Evidence:
    return Evidence(kind="measurement", text=text, data={
        "what": what, "seconds": round(value_seconds, 3), "at": face.json(at), "reference": face.json(reference),
        **extra})


def transition(*, text: str, tz: str, at: datetime, offset_before: float, offset_after: float, type_: str,
               face: Timeface, **extra: Any) -> Evidence:
    return Evidence(kind="transition", text=text, data={
        "tz": tz, "at": face.json(at, tz), "offset_before": offset_before, "offset_after": offset_after,
        "type": type_, **extra})


def note(text: str, **data: Any) -> Evidence:
    return Evidence(kind="note", text=text, data=data)


def _first_line(value: Any) -> str:
    text = str(value or "").strip()
    first = text.splitlines()[-1] if "Traceback" in text else (text.splitlines()[0] if text else "")
    return first[:300]


def _detail_text(detail: dict[str, Any]) -> str:
    if "summary" in detail:
        return str(detail["summary"])
    return ", ".join(f"{k}={v}" for k, v in detail.items()) or "(no detail)"
