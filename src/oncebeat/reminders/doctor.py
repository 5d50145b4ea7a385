"""The reminder app's part of the doctor: its checks, its ``--invoice`` scope, ``explain invoice``, and the
reminder rows it adds as evidence to the engine's findings.

Registered with :mod:`oncebeat.doctor.registry` by :func:`register`, which ``oncebeat.reminders`` calls on
import; everything here reads the app's own SQL line (``reminders/sql/common/doctor.sql`` and the dialect
blocks in ``reminders/sql/<backend>/doctor.sql``) and takes part only where that line is migrated. The
engine's doctor knows no invoice: a library user's app (``--app``) gets the engine's checks alone.

- ``lost`` (the app's part): reminders pending with no unfinished send job, or pending far too long.
- ``undelivered``: reminders that failed, or wait out a mail outage longer than :data:`OUTAGE_ALERT`.
- scope ``invoice``: ``run_doctor(store, now=…, invoice="INV-1")`` keeps that invoice's reminders, their
  jobs, effects and mail, and the schedule occurrences that created them.
- ``explain(store, "invoice", "INV-1")``: the invoice's story, reminder by reminder.
- evidence: the reminder behind an effect ``reminder:N`` in doubt or a discarded send job; the invoice and
  stage a delivered message carries (``X-Oncebeat-Invoice``/``-Stage``/``-Reminder``), so copies of one
  reminder sent under different Message-IDs are found as one message delivered twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from ..doctor import evidence as ev
from ..doctor.checks import capped, plural
from ..doctor.explain import CREATED, EFFECT_END, EFFECT_START, FAILED, MAX_RELATED, Story, default_tz, job_entries
from ..doctor.facts import Facts, header, jobs_by_unique_keys, occurrences_by_ids, source_text
from ..doctor.model import Evidence, Finding, Timeface, duration_text
from ..doctor.registry import (
    Context,
    Hooks,
    Scope,
    register_check,
    register_explain,
    register_hooks,
    register_scope,
)
from ..errors import OncebeatError
from ..mail.maildir import StoredMessage
from ..store import Store
from .accounting import pending_fates, reminder_label
from .model import superseded_stages

__all__ = ["register", "reminder_evidence", "check_lost_reminders", "check_undelivered", "PENDING_GRACE",
           "OUTAGE_ALERT", "LINE"]

LINE = "reminders"  # the SQL line these checks read (oncebeat.reminders.SQL)
PENDING_GRACE = timedelta(hours=1)  # a reminder pending longer than this is reported
OUTAGE_ALERT = timedelta(hours=1)  # a reminder waiting out a mail outage longer than this is an error
_PREFIX = "reminder:"  # the effect key (and send job unique key) of reminder N is "reminder:N"


def reminder_evidence(r: Mapping[str, Any], face: Timeface, tz: str | None = None) -> Evidence:
    """A reminder row (with its invoice ``number``) as evidence of kind ``reminder``."""
    text = (f"reminder {r['id']} for invoice {r.get('number')} stage {r['stage']}: {r['state']}"
            f", created {face.text(r['created_at'], tz)} by occurrence {r.get('occurrence_id')}"
            + (f", sent {face.text(r['sent_at'], tz)}" if r.get("sent_at") else "")
            + (f", Message-ID {r['message_id']}" if r.get("message_id") else "")
            + (f"; {r['reason']}" if r.get("reason") else ""))
    return Evidence(kind="reminder", text=text, data={
        "id": r["id"], "invoice": r.get("number"), "stage": r["stage"], "state": r["state"],
        "occurrence_id": r.get("occurrence_id"), "business_date": r.get("business_date"),
        "created_at": face.json(r["created_at"], tz), "sent_at": face.json(r.get("sent_at"), tz),
        "message_id": r.get("message_id"), "reason": r.get("reason")})


def _reminder_id(effect_key: str) -> int | None:
    tail = effect_key.removeprefix(_PREFIX)
    return int(tail) if effect_key.startswith(_PREFIX) and tail.isdigit() else None


def _reminders_by_ids(facts: Facts, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    rows = facts.store.read("doctor_reminders_by_ids", ids=sorted(set(ids))) if ids else []
    return {int(r["id"]): r for r in rows}


# --- scope and checks --------------------------------------------------------------------------------------


def _invoice_scope(facts: Facts, number: str) -> Scope:
    """``--invoice N``: its reminders, their send jobs and effects, the occurrences that created them, its mail."""
    if not facts.store.read("doctor_invoice", number=number):
        raise OncebeatError(f"doctor --invoice {number!r}: no such invoice number in the database")
    reminders = facts.store.read("doctor_reminders_of_invoices", numbers=[number])
    keys = {f"{_PREFIX}{int(r['id'])}" for r in reminders}
    occs = facts.load_occurrences(int(r["occurrence_id"]) for r in reminders if r["occurrence_id"] is not None)
    jobs = facts.jobs_by_unique_keys(keys) if keys else []
    job_ids = {int(j["id"]) for j in jobs} | {int(o["job_id"]) for o in occs.values() if o["job_id"]}
    return Scope(job_ids=frozenset(job_ids), effect_keys=frozenset(keys),
                 schedule_keys=frozenset(str(o["schedule_key"]) for o in occs.values()),
                 message_ok=lambda m: header(m, "X-Oncebeat-Invoice") == number,
                 notes=() if reminders else (f"invoice {number} has no reminders yet",))


def check_lost_reminders(facts: Facts) -> list[Finding]:
    """The app's part of ``lost``: reminders pending with no unfinished send job, or pending too long."""
    face = facts.face
    fates = pending_fates(facts.store, _pending_in_scope(facts))  # check counts lost by the same rule
    jobs = facts.load_jobs(int(r["open_job_id"]) for r in fates.queued)
    orphans = fates.lost
    # those waiting out a mail outage (fates.outage) are check_undelivered's
    # those waiting for fresh payment data on purpose (reason "waiting: …") are doctorwait's
    slow = [r for r in fates.queued if facts.now - r["created_at"] > PENDING_GRACE
            and not str(r.get("reason") or "").startswith("waiting: ")]
    findings: list[Finding] = []
    if orphans:
        findings.append(Finding(
            code="lost", severity="error",
            summary=(f"{plural(len(orphans), 'reminder')} pending with no unfinished send job (oldest created "
                     f"{face.text(orphans[0]['created_at'])}): nothing will send them until the next scan"),
            subject=f"invoice:{orphans[0]['number']}",
            evidence=capped([reminder_evidence(r, face) for r in orphans]),
            fix=("Run the scan again (`oncebeat trigger reminders`): it re-enqueues a send job for every pending "
                 "reminder. Then find out what cancelled or dropped the jobs.")))
    if slow:
        items = []
        for r in slow:
            items.append(reminder_evidence(r, face))
            j = jobs.get(int(r["open_job_id"]))
            if j:
                items.append(ev.job(j, face))
        findings.append(Finding(
            code="lost", severity="warning",
            summary=(f"{plural(len(slow), 'reminder')} pending for more than "
                     f"{duration_text(PENDING_GRACE.total_seconds())} "
                     f"(oldest created {face.text(slow[0]['created_at'])}), their send jobs not finished"),
            subject=f"invoice:{slow[0]['number']}", evidence=capped(items),
            fix="Check that workers are running and look at the send jobs' last errors (SMTP down, retries backing "
                "off)."))
    return findings


def _pending_in_scope(facts: Facts) -> list[dict[str, Any]]:
    pending = facts.store.read("doctor_pending_reminders")
    number = facts.scope_args.get("invoice")
    if number is not None:
        return [r for r in pending if r["number"] == number]
    if facts.schedule_keys is not None:
        keys = facts.schedule_keys
        occs = facts.load_occurrences(int(r["occurrence_id"]) for r in pending if r["occurrence_id"] is not None)
        return [r for r in pending if r["occurrence_id"] is not None and int(r["occurrence_id"]) in occs
                and occs[int(r["occurrence_id"])]["schedule_key"] in keys]
    return pending


def _first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return (lines[0] if lines else "no reason recorded")[:240]


def check_undelivered(facts: Facts) -> list[Finding]:
    """Reminders that did not go out: ``failed`` ones (since ``--since``), and pending ones waiting out a mail
    outage for more than :data:`OUTAGE_ALERT` (the server refuses sessions: down, 4xx, TLS or login)."""
    face = facts.face
    failed = facts.store.read("doctor_failed_reminders", since=facts.since)
    deferred = facts.store.read("doctor_deferred_reminders", before=facts.now - OUTAGE_ALERT)
    number = facts.scope_args.get("invoice")
    if number is not None:
        failed = [r for r in failed if r["number"] == number]
        deferred = [r for r in deferred if r["number"] == number]
    findings: list[Finding] = []
    if failed:
        last = failed[-1]
        outage = sum(1 for r in failed if "mail outage" in str(r["reason"] or ""))
        findings.append(Finding(
            code="undelivered", severity="error",
            summary=(f"{plural(len(failed), 'reminder')} failed: not delivered"
                     + (f" ({outage} after a mail outage longer than outage_retry)" if outage else "")
                     + f"; the latest at {face.text(last['updated_at'])}: {_first_line(last['reason'])}"),
            subject=f"invoice:{last['number']}", evidence=capped([reminder_evidence(r, face) for r in failed]),
            fix=("Fix the cause each reason names (for a mail outage: SMTP_URL, the mail server, its TLS or login; "
                 "for a 5xx: the customer's address), then run `oncebeat reminders retry --failed` (add "
                 "`--since YYYY-MM-DD` to retry only recent ones). Sent and in-doubt reminders are never retried.")))
    if deferred:
        first = deferred[0]
        findings.append(Finding(
            code="undelivered", severity="error",
            summary=(f"{plural(len(deferred), 'reminder')} waiting out a mail outage for more than "
                     f"{duration_text(OUTAGE_ALERT.total_seconds())} (since {face.text(first['deferred_since'])}, "
                     f"{duration_text((facts.now - first['deferred_since']).total_seconds())} ago): "
                     f"{_first_line(deferred[-1]['reason'])}"),
            subject=f"invoice:{first['number']}", evidence=capped([reminder_evidence(r, face) for r in deferred]),
            fix=("The mail server refuses the sessions (the reason says how): check SMTP_URL, the server, its TLS "
                 "certificate and the login. The reminders are tried again with backoff, without using up their "
                 "attempts, and go out once it answers; after [delivery] outage_retry (default 24h) they end "
                 "failed.")))
    return findings


# --- evidence for the engine's checks ----------------------------------------------------------------------


class ReminderHooks(Hooks):
    """The reminder rows behind the engine's effects, jobs and delivered messages."""

    name = "reminders"
    sql_line = LINE

    def effect_context(self, facts: Facts, keys: Sequence[str]) -> dict[str, Context]:
        ids = {k: rid for k in keys if (rid := _reminder_id(k)) is not None}
        rows = _reminders_by_ids(facts, list(ids.values()))
        return {k: Context(evidence=(reminder_evidence(rows[rid], facts.face),), message_id=rows[rid].get("message_id"))
                for k, rid in ids.items() if rid in rows}

    def job_context(self, facts: Facts, jobs: Sequence[Mapping[str, Any]]) -> dict[int, Context]:
        ids = {int(j["id"]): j["args"]["reminder_id"] for j in jobs
               if isinstance(j.get("args"), dict) and isinstance(j["args"].get("reminder_id"), int)}
        rows = _reminders_by_ids(facts, list(ids.values()))
        out = {}
        for jid, rid in ids.items():
            if rid in rows:
                pending = rows[rid]["state"] == "pending"
                out[jid] = Context(evidence=(reminder_evidence(rows[rid], facts.face),),
                                   fix="the next reminder scan re-enqueues pending reminders by itself" if pending
                                   else None)
        return out

    def message_effect(self, msg: StoredMessage) -> str | None:
        rid = header(msg, "X-Oncebeat-Reminder")
        return f"{_PREFIX}{rid}" if rid else None

    def effect_sends_mail(self, key: str) -> bool:
        return key.startswith(_PREFIX)

    def message_group(self, msg: StoredMessage) -> str | None:
        return reminder_label(msg)  # check groups copies by the same label (accounting.duplicate_copies)

    def message_fields(self, msg: StoredMessage) -> tuple[str, dict[str, Any]]:
        invoice, stage = header(msg, "X-Oncebeat-Invoice"), header(msg, "X-Oncebeat-Stage")
        rid = header(msg, "X-Oncebeat-Reminder")
        text = (f", invoice {invoice} stage {stage}" if invoice else "") + (f", reminder {rid}" if rid else "")
        return text, {"invoice": invoice, "stage": int(stage) if stage and stage.isdigit() else stage,
                      "reminder_id": int(rid) if rid and rid.isdigit() else rid}

    def group_context(self, facts: Facts, messages: Sequence[StoredMessage]) -> Context | None:
        invoice, stage = header(messages[0], "X-Oncebeat-Invoice"), header(messages[0], "X-Oncebeat-Stage")
        if not invoice:
            return None
        rows = facts.store.read("doctor_reminders_of_invoices", numbers=[invoice])
        rem = next((r for r in rows if str(r["stage"]) == (stage or "")), None)
        items: list[Evidence] = []
        if rem:
            face = facts.face
            key = f"{_PREFIX}{rem['id']}"
            items.append(reminder_evidence(rem, face))
            items += [ev.effect(e, face, facts.proc(e.get("process_id"))) for e in facts.effects_by_keys([key])]
            items += [ev.job(j, face) for j in facts.jobs_by_unique_keys([key])]
            items += [ev.event(e, face) for e in facts.events_for_subjects([f"effect:{key}"])]
        return Context(evidence=tuple(items), subject=f"invoice:{invoice}", fix=(
            "Tell the customer if needed, then follow the evidence: with one Message-ID check the effect's "
            "history (`oncebeat doctor --invoice N`); with several, find the other sender and stop it."))

    def occurrence_story(self, store: Store, occurrence: Mapping[str, Any]) -> tuple[list[Any], list[str]]:
        reminders = store.read("doctor_reminders_of_occurrence", occurrence_id=occurrence["id"])
        entries: list[Any] = []
        for r in reminders[:MAX_RELATED]:
            entries.append((r["created_at"], EFFECT_START,
                            f"reminder {r['id']} created for invoice {r['number']} stage {r['stage']}"
                            + (f" ({r['reason']})" if r["state"] == "skipped" and r["reason"] else "")
                            + _superseded_text(r)))
            if r["sent_at"]:
                entries.append((r["sent_at"], EFFECT_END, f"reminder {r['id']} (invoice {r['number']} stage "
                                                          f"{r['stage']}) sent, Message-ID {r['message_id']}"))
            elif r["state"] not in ("pending", "skipped"):
                entries.append((r["updated_at"], FAILED,
                                f"reminder {r['id']} (invoice {r['number']}) {r['state']}: {r['reason']}"))
        header_lines = ([f"{len(reminders)} reminders were created by this occurrence; the first {MAX_RELATED} "
                         "are shown"] if len(reminders) > MAX_RELATED else [])
        return entries, header_lines


# --- explain invoice ---------------------------------------------------------------------------------------


def explain_invoice(store: Store, number: str) -> list[str]:
    """The story of one invoice: the invoice now, then each reminder's creation, send jobs, effects and end.

    Raises:
        OncebeatError: no invoice with that number.
    """
    rows = store.read("doctor_invoice", number=number)
    if not rows:
        raise OncebeatError(f"no invoice {number!r}")
    inv = rows[0]
    reminders = store.read("doctor_reminders_of_invoices", numbers=[number])
    occ_ids = sorted({int(r["occurrence_id"]) for r in reminders if r["occurrence_id"] is not None})
    occs = occurrences_by_ids(store, occ_ids)
    tz = next((str(o["tz"]) for o in occs.values()), None) or default_tz(store)
    story = Story(face=Timeface(tz), tz=tz)
    story.header.append(f"invoice {inv['number']}: {inv['amount_due']} minor units of {inv['currency']} due "
                        f"{inv['due_on']}, issued {inv['issued_on']}, status {inv['status']}"
                        + (f" (paid {inv['paid_on']})" if inv["paid_on"] else "")
                        + f"; customer {inv['name']} <{inv['email']}>")
    if not reminders:
        story.header.append("no reminder has been created for it")
    for r in reminders:
        _reminder_story(store, story, r, occs)
    story.add(inv["updated_at"], f"invoice row last written (status now {inv['status']})", CREATED)
    return story.lines()


def _reminder_story(store: Store, story: Story, r: dict[str, Any], occs: dict[int, dict[str, Any]]) -> None:
    face, tz = story.face, story.tz
    story.header.append(f"reminder {r['id']} stage {r['stage']}: {r['state']}"
                        + (f", Message-ID {r['message_id']}" if r["message_id"] else "")
                        + (f" ({r['reason']})" if r["reason"] else "") + _superseded_text(r))
    occ = occs.get(int(r["occurrence_id"])) if r["occurrence_id"] is not None else None
    by = (f" by the scan of occurrence {occ['id']} ({occ['schedule_key']} at {face.text(occ['fire_at'], tz)}, "
          f"{occ['outcome']} by {source_text(occ)})" if occ else "")
    story.add(r["created_at"], f"reminder {r['id']} stage {r['stage']} created "
                               f"({_created_as(r)}) for "
                               f"business date {r['business_date']}{by}", CREATED)
    for j in jobs_by_unique_keys(store, [f"{_PREFIX}{r['id']}"]):
        job_entries(store, story, j, prefix=f"send job {j['id']}: ")
    if r["sent_at"] is not None:
        story.add(r["sent_at"], f"reminder {r['id']} stage {r['stage']} sent, Message-ID {r['message_id']}",
                  EFFECT_END)
    elif r["state"] in ("failed", "in_doubt", "deferred") or (r["state"] in ("skipped", "held")
                                                               and r["updated_at"] != r["created_at"]):
        story.add(r["updated_at"], f"reminder {r['id']} stage {r['stage']} {r['state']}: {r['reason']}", FAILED)
    if r.get("capped_at") is not None and r["state"] != "deferred":  # deferred by the cap, then decided
        story.add(r["capped_at"], f"reminder {r['id']} stage {r['stage']} deferred: {r.get('cap_reason')}", CREATED)


def _created_as(r: Mapping[str, Any]) -> str:
    """How a reminder was created: pending, or decided by the scan itself (skipped; held by a hold, reminders 0009)."""
    if r["state"] == "skipped" or (r["state"] == "held" and r["updated_at"] == r["created_at"]):
        return f"{r['state']}: {r['reason']}"
    return "pending"


def _superseded_text(r: Mapping[str, Any]) -> str:
    """"; stages 1, 7 skipped: superseded by this one" for a reminder row that records superseded stages
    (reminders migration 0007), else ""."""
    stages = superseded_stages(dict(r))
    if not stages:
        return ""
    listed = ", ".join(str(s) for s in stages)
    return f"; stage{'s' if len(stages) > 1 else ''} {listed} skipped: superseded by this one"


def register() -> None:
    """Register the reminder app's checks, scope, explain kind and hooks with the doctor (idempotent)."""
    register_check("lost", check_lost_reminders, title="reminders pending with no send job, or too long",
                   order=79, part="reminders", sql_line=LINE)
    register_check("undelivered", check_undelivered, title="reminders failed or waiting out a mail outage",
                   order=120, part="reminders", sql_line=LINE)
    register_scope("invoice", _invoice_scope, help="only what belongs to this invoice number", sql_line=LINE)
    register_explain("invoice", explain_invoice, numeric=False, help="an invoice, by number", sql_line=LINE)
    register_hooks(ReminderHooks())
    from . import doctorwait  # imports this module: registered last, after it is complete

    doctorwait.register()
