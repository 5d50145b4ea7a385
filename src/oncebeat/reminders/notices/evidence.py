"""Proof of notice: for each stage of one invoice, what happened, why, with which message and on whose trigger.

One record per invoice (``oncebeat evidence INVOICE``, the dashboard's download on the invoice page), built only
from what is already recorded and through the verbs that own it:

- the invoice, its customer and its stages with their effect rows: :meth:`ReminderService.invoice_story` (a
  stage recorded superseded in a higher stage's row is a stage of its own there, as everywhere);
- holds: :func:`oncebeat.reminders.holds.holds_of_invoice`; occurrences: :func:`oncebeat.ledger.get_occurrence`;
  the effect's audit trail (in doubt, reconciled by whom): :func:`oncebeat.audit.events_of`; the send jobs of a
  stage: ``evidence_send_jobs`` (``reminders/sql/common/evidence.sql``, this module's only query);
- the message: its frozen bytes while the ledger keeps them (pending, in doubt, failed), else the facts the send
  job recorded in the effect's result when it was delivered (:mod:`.digest`: SHA-256, size, headers).

The record is plain JSON (schema ``oncebeat.evidence/1``, documented in ``docs/evidence.md``): every instant as
``{"utc", "business", "customer"}`` ISO texts (UTC, the policy's business zone, the customer's zone), money in
minor units with its ISO 4217 code. Its canonical text (:func:`canonical_json`: sorted keys, two-space indent,
UTF-8, one final newline) is what ``--json`` prints and what the PDF embeds; the PDF prints that text's SHA-256,
so ``sha256sum`` of the JSON file ties the two together.

States and reasons this module does not know (a state another feature adds, such as ``deferred``) are shown as
they are recorded, state and reason text, never refused.

Example::

    record = build_evidence(runtime.service, "INV-1", database=redact_url(runtime.store.url))
    print(record.text)            # the canonical JSON
    record.sha256                 # hex SHA-256 of record.text encoded UTF-8
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ... import audit
from ...errors import OncebeatError
from ...ledger import get_occurrence
from ...provenance import VERSION, Source
from ...store import Store
from ...timebase import Clock
from ..holds import holds_of_invoice
from ..model import reminder_key
from ..render import format_money
from .digest import message_facts
from .fees import fees_of_invoice
from .grouping import notice_key

if TYPE_CHECKING:
    from ..service import ReminderService

__all__ = ["SCHEMA", "EvidenceRecord", "Zones", "build_evidence", "canonical_json", "record_read", "stage_record",
           "summary_lines", "why"]

SCHEMA = "oncebeat.evidence/1"
READ_EVENT = "reminders.evidence_read"  # the audit event of every record built for a person (a read of customer data)


@dataclass(frozen=True, kw_only=True, slots=True)
class EvidenceRecord:
    """One invoice's proof of notice.

    Attributes:
        data: the record (JSON-ready: str, int, bool, None, lists and dicts only).
        text: its canonical JSON text (:func:`canonical_json`).
        sha256: hex SHA-256 of ``text`` encoded UTF-8 (what the PDF prints).
    """

    data: dict[str, Any]
    text: str
    sha256: str

    @property
    def number(self) -> str:
        return str(self.data["invoice"]["number"])


def canonical_json(data: Mapping[str, Any]) -> str:
    """The one text of a record: keys sorted, two-space indent, non-ASCII kept (UTF-8), one final newline."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


class Zones:
    """The business zone and the customer's zone an instant is shown in."""

    def __init__(self, business: str, customer: str | None) -> None:
        self.business_name = business
        self.business = ZoneInfo(business)
        self.customer_name = customer or business
        self.customer_note: str | None = None
        try:
            self.customer = ZoneInfo(self.customer_name)
        except (ZoneInfoNotFoundError, ValueError):
            # A zone stored for a customer that is no IANA zone: shown in the business zone, and said so.
            self.customer_note = f"customer zone {customer!r} is not an IANA zone; times shown in {business}"
            self.customer_name = business
            self.customer = self.business

    def instant(self, value: datetime | None) -> dict[str, str] | None:
        """``{"utc", "business", "customer"}`` ISO texts of aware ``value`` (None stays None)."""
        if value is None:
            return None
        return {"utc": value.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "business": value.astimezone(self.business).isoformat(),
                "customer": value.astimezone(self.customer).isoformat()}


def _text(value: Any) -> Any:
    """Dates as ISO text; everything else as it is (the record holds JSON values only)."""
    return value.isoformat() if isinstance(value, date) else value


def _source(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The provenance (G8) of a row with ``source_*`` columns, or None when it has none."""
    if row.get("source_kind") is None:
        return None
    return {"kind": row["source_kind"], "host": row.get("source_host"), "pid": row.get("source_pid"),
            "name": row.get("source_name"), "version": row.get("source_version")}


def _hold(hold: Mapping[str, Any] | None, zones: Zones) -> dict[str, Any] | None:
    if hold is None:
        return None
    return {"id": hold["id"], "reason": hold.get("reason"), "on": "invoice" if hold.get("invoice_id") else "customer",
            "note": hold.get("note"), "promise_until": _text(hold.get("promise_until")),
            "resumes_on": _text(hold.get("resumes_on")), "external_ref": hold.get("external_ref"),
            "placed_by": hold.get("created_by"), "placed_at": zones.instant(hold.get("created_at")),
            "released_by": hold.get("released_by"), "released_at": zones.instant(hold.get("released_at")),
            "release_note": hold.get("release_note")}


def _skip_kind(reason: str) -> str:
    """What a skipped stage's reason says: paid, void, superseded, or (a reason this module does not know) skipped."""
    for prefix, kind in (("invoice paid", "paid"), ("invoice void", "void"), ("invoice uncollectible", "uncollectible"),
                         ("superseded", "superseded")):
        if reason.startswith(prefix):
            return kind
    return "skipped"


def why(row: Mapping[str, Any], *, reply: str | None, hold: Mapping[str, Any] | None,
        resolution: Mapping[str, Any] | None) -> dict[str, Any]:
    """Why stage ``row`` ended as it did: ``{"kind", "text"}``.

    ``kind``: ``sent``, ``held``, ``paid``/``void``/``uncollectible``/``superseded``/``skipped`` (a skip),
    ``failed``, ``in_doubt``, ``pending``, or the recorded state itself for a state this module does not know
    (e.g. ``deferred``), whose ``text`` is then the recorded reason as it is.
    """
    state = str(row.get("state"))
    reason = str(row["reason"]) if row.get("reason") else ""
    if state == "sent":
        if resolution is not None and resolution.get("outcome") == "done":
            return {"kind": "sent", "text": "in doubt, then resolved by an operator: it was delivered"}
        code = reply.split(" ", 1)[0] if reply else None  # the reply itself is the record's smtp_reply
        return {"kind": "sent", "text": f"accepted by the mail server ({code})" if code else (reason or "sent")}
    if state == "held":
        who = f" placed by {hold['created_by']}" if hold is not None and hold.get("created_by") else ""
        note = f"; note: {hold['note']}" if hold is not None and hold.get("note") else ""
        return {"kind": "held", "text": (reason or "held") + who + note}
    if state == "skipped":
        return {"kind": _skip_kind(reason), "text": reason or "skipped"}
    if state == "failed":
        return {"kind": "failed", "text": reason or "failed"}
    if state == "in_doubt":
        return {"kind": "in_doubt", "text": (reason or "the delivery's outcome is unknown")
                + "; waiting for a decision (oncebeat effects resolve)"}
    if state == "pending":
        if row.get("deferred_since") is not None:
            return {"kind": "pending", "text": f"waiting out a mail outage: {reason}" if reason else "waiting"}
        return {"kind": "pending", "text": reason or "not sent yet"}
    return {"kind": state, "text": reason or state}  # a state added later: as recorded


def _result(effect: Mapping[str, Any] | None) -> dict[str, Any]:
    """The effect's recorded result when it is an object (a delivery's: message_id, reply, message_facts), else {}."""
    result = effect.get("result") if effect is not None else None
    return result if isinstance(result, dict) else {}


def _message(effect: Mapping[str, Any] | None, include_message: bool) -> dict[str, Any] | None:
    """The frozen message's facts: from its bytes while the ledger keeps them, else from the delivery's result."""
    if effect is None:
        return None
    frozen = effect.get("frozen")
    result = _result(effect)
    if frozen is not None:
        data = bytes(frozen)
        out = message_facts(data) | {"bytes_kept": True}
        if include_message:
            out["base64"] = base64.b64encode(data).decode("ascii")
        return out
    facts = result.get("message_facts")
    if isinstance(facts, dict):
        return {"sha256": facts.get("sha256"), "size": facts.get("size"), "headers": facts.get("headers") or [],
                "bytes_kept": False}
    return None


def _notice(notice: Mapping[str, Any] | None, zones: Zones) -> dict[str, Any] | None:
    """The grouped notice a stage went out in (``group = "customer"``): its id, state, Message-ID, business date,
    send time and every (invoice, stage) it listed; None for a stage sent on its own."""
    if not notice:
        return None
    return {"id": notice["id"], "state": notice.get("state"), "message_id": notice.get("message_id"),
            "business_date": _text(notice.get("business_date")), "sent": zones.instant(notice.get("sent_at")),
            "listed": [{"invoice": r["number"], "stage": r["stage"], "state": r["state"]}
                       for r in notice.get("rows", [])]}


def _header(message: Mapping[str, Any] | None, name: str) -> str | None:
    for header_name, value in (message or {}).get("headers") or []:
        if str(header_name).lower() == name.lower():
            return str(value)
    return None


def _doubt(events: Sequence[Mapping[str, Any]], zones: Zones) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(in doubt: since when and why, resolved: outcome, when, by whom) from an effect's audit events (oldest
    first); each None when it never happened."""
    doubt: dict[str, Any] | None = None
    resolution: dict[str, Any] | None = None
    for ev in events:
        raw = ev.get("detail")
        detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if ev.get("kind") == "effect.in_doubt":
            doubt = {"at": zones.instant(ev.get("at")), "detail": detail.get("detail"), "event_id": ev.get("id")}
            resolution = None  # a later doubt (after a not_done resend) needs its own decision
        elif ev.get("kind") == "effect.reconciled" and doubt is not None:
            operator = detail.get("operator")
            resolution = {"outcome": detail.get("outcome"), "at": zones.instant(ev.get("at")),
                          "by": operator if operator else ("operator" if detail.get("by") == "operator"
                                                           else "reconcile hook"),
                          "source": _source(ev), "event_id": ev.get("id")}
    return doubt, resolution


def stage_record(row: Mapping[str, Any], *, effect: Mapping[str, Any] | None, hold: Mapping[str, Any] | None,
                 occurrence: Mapping[str, Any] | None, send_jobs: Sequence[Mapping[str, Any]],
                 events: Sequence[Mapping[str, Any]], zones: Zones, include_message: bool = False) -> dict[str, Any]:
    """The record of one stage from what is recorded about it (pure: no database read).

    Args:
        row: the reminder row as :meth:`ReminderService.invoice_story` lists it (``superseded_by`` set on a stage
            recorded in a higher stage's row); columns this module does not know are ignored.
        effect: its effect ledger row or None; hold: the hold row its ``hold_id`` names or None; occurrence: the
            occurrence row that created it or None; send_jobs: its send jobs' rows; events: its effect's audit
            events, oldest first.
        include_message: add the message bytes (base64) when the ledger still keeps them.
    """
    result = _result(effect)
    reply = result.get("reply")
    message = _message(effect, include_message)
    doubt, resolution = _doubt(events, zones)
    if reply is None and row.get("state") == "failed" and row.get("reason"):
        reply = str(row["reason"])  # the server's refusal as the send recorded it
    message_id = row.get("message_id") or result.get("message_id") or _header(message,
                                                                                                   "Message-ID")
    return {
        "stage": row.get("stage"),
        "state": row.get("state"),
        "reason": row.get("reason"),
        "why": why(row, reply=reply if isinstance(reply, str) else None, hold=hold, resolution=resolution),
        "business_date": _text(row.get("business_date")),
        "times": {"created": zones.instant(row.get("created_at")), "updated": zones.instant(row.get("updated_at")),
                  "sent": zones.instant(row.get("sent_at")),
                  "waiting_since": zones.instant(row.get("deferred_since"))},
        "message_id": message_id,
        "smtp_reply": reply,
        "message": message,
        "hold": _hold(hold, zones),
        "notice": _notice(row.get("notice"), zones),
        "in_doubt": None if doubt is None else doubt | {"resolution": resolution},
        "provenance": {
            "reminder_id": row.get("id") if row.get("superseded_by") is None else None,
            "recorded_in_reminder": row.get("superseded_by"),
            "occurrence": None if occurrence is None else {
                "id": occurrence["id"], "schedule_key": occurrence.get("schedule_key"),
                "fire_at": zones.instant(occurrence.get("fire_at")),
                "local_fire_at": occurrence.get("local_fire_at"), "tz": occurrence.get("tz"),
                "outcome": occurrence.get("outcome"), "scan_job_id": occurrence.get("job_id"),
                "source": _source(occurrence)},
            "occurrence_id": row.get("occurrence_id"),
            "send_jobs": [{"id": j["id"], "state": j.get("state"), "attempt": j.get("attempt"),
                           "max_attempts": j.get("max_attempts"), "created_at": zones.instant(j.get("created_at")),
                           "finished_at": zones.instant(j.get("finished_at")), "source": _source(j)}
                          for j in send_jobs],
            "effect": None if effect is None else {
                "key": effect["key"], "state": effect.get("state"), "job_id": effect.get("job_id"),
                "attempt": effect.get("attempt"), "started_at": zones.instant(effect.get("started_at")),
                "point_of_no_return_at": zones.instant(effect.get("no_return_at")),
                "finished_at": zones.instant(effect.get("finished_at")), "detail": effect.get("detail"),
                "source": _source(effect)},
            "effect_events": [{"id": ev.get("id"), "kind": ev.get("kind"), "at": zones.instant(ev.get("at")),
                               "detail": ev.get("detail"), "source": _source(ev)} for ev in events],
        },
    }


def build_evidence(service: ReminderService, number: str, *, database: str, include_message: bool = False,
                   now: datetime | None = None) -> EvidenceRecord:
    """The proof of notice of invoice ``number`` (reads only; see the module docstring for what it holds).

    Args:
        database: how the record names its database, already redacted (``redact_url(store.url)``).
        include_message: each stage's message bytes (base64) where the ledger still keeps them.
        now: the record's ``generated_at`` (aware); default the service clock's now.
    Raises:
        OncebeatError: no invoice ``number``.
    """
    story = service.invoice_story(number)
    if story is None:
        raise OncebeatError(f"no invoice {number!r}: invoice numbers are matched exactly, case included; the "
                            "dashboard's Reminders search finds a customer's invoices by email")
    store = service.store
    invoice = story["invoice"]
    zones = Zones(service.policy.tz, invoice.get("customer_tz"))
    holds = {h["id"]: h for h in holds_of_invoice(store, invoice["id"])}
    occurrences: dict[int, dict[str, Any] | None] = {}
    fees = {int(f["stage"]): f for f in fees_of_invoice(store, invoice["id"])}  # issue 24.4: once per stage
    stages = []
    for r in story["reminders"]:
        occ_id = r.get("occurrence_id")
        if occ_id is not None and occ_id not in occurrences:
            occurrences[occ_id] = get_occurrence(store, occ_id)
        real = r.get("superseded_by") is None
        # a grouped stage's email is its notice's effect (group = "customer")
        key = notice_key(r["notice"]["id"]) if r.get("notice") else reminder_key(r["id"])
        jobs = store.read("evidence_send_jobs", occurrence_id=occ_id, key=key) if real and occ_id is not None else []
        events = list(reversed(audit.events_of(store, f"effect:{key}"))) if real else []
        stages.append(stage_record(r, effect=r.get("effect"), hold=holds.get(r.get("hold_id")),
                                   occurrence=occurrences.get(occ_id) if occ_id is not None else None,
                                   send_jobs=jobs, events=events, zones=zones, include_message=include_message))
        fee = fees.get(int(r["stage"])) if real else None
        stages[-1]["fee"] = None if fee is None else {
            "amount_minor": int(fee["amount"]), "currency": fee["currency"],
            "amount": format_money(int(fee["amount"]), fee["currency"], "en_US"), "basis": fee["basis"],
            "rule": fee["rule"], "recorded_at": zones.instant(fee["created_at"])}
    generated = now or service.clock.now()
    data = {
        "schema": SCHEMA,
        "generated_at": zones.instant(generated),
        "generated_by": f"oncebeat {VERSION}",
        "database": database,
        "company": service.policy.company,
        "zones": {"business": zones.business_name, "customer": zones.customer_name, "note": zones.customer_note},
        "invoice": {"number": invoice["number"], "status": invoice.get("status"), "currency": invoice["currency"],
                    "amount_due_minor": invoice["amount_due"],
                    "amount_due": format_money(int(invoice["amount_due"]), invoice["currency"], "en_US"),
                    "issued_on": _text(invoice.get("issued_on")), "due_on": _text(invoice.get("due_on")),
                    "paid_on": _text(invoice.get("paid_on"))},
        "customer": {"name": invoice.get("name"), "email": invoice.get("email"), "locale": invoice.get("locale"),
                     "tz": invoice.get("customer_tz")},
        "include_message": include_message,
        "stages": stages,
    }
    text = canonical_json(data)
    return EvidenceRecord(data=data, text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


def record_read(store: Store, *, clock: Clock, source: Source, record: EvidenceRecord, form: str) -> None:
    """Audit that a person read ``record`` (customer data) as ``form`` (``json``, ``pdf``, ``text``): one
    ``reminders.evidence_read`` event on ``invoice:<number>`` with the record's SHA-256 and the operator."""
    with store.transaction() as tx:
        audit.record(tx, now=clock.now(), kind=READ_EVENT, subject=f"invoice:{record.number}", source=source,
                     detail={"form": form, "record_sha256": record.sha256, "stages": len(record.data["stages"]),
                             "include_message": bool(record.data.get("include_message"))})


#: The headers the text summary prints per stage (the JSON and the PDF hold them all): recipients and subject.
_SUMMARY_HEADERS = ("from", "to", "cc", "subject")


def summary_lines(record: EvidenceRecord) -> list[str]:
    """The record for a terminal: one block per stage (the JSON and the PDF hold everything)."""
    d = record.data
    inv = d["invoice"]
    lines = [f"Proof of notice: invoice {inv['number']} ({inv['status']}), {inv['amount_due']} due {inv['due_on']}, "
             f"customer {d['customer']['name']} <{d['customer']['email']}>",
             f"company {d['company']}; business zone {d['zones']['business']}, customer zone "
             f"{d['zones']['customer']}; generated {d['generated_at']['utc']}; record SHA-256 {record.sha256}"]
    if not d["stages"]:
        lines.append("no stage recorded for this invoice yet")
    for s in d["stages"]:
        times = s["times"]
        when = times["sent"] or times["updated"] or times["created"]
        lines.append("")
        lines.append(f"stage {s['stage']}: {s['state']} ({s['why']['kind']}) - {s['why']['text']}")
        if when is not None:
            lines.append(f"  at {when['business']} ({d['zones']['business']}) = {when['customer']} (customer) = "
                         f"{when['utc']}")
        if s["message_id"]:
            lines.append(f"  Message-ID {s['message_id']}")
        if s.get("notice"):
            listed = ", ".join(f"{x['invoice']} stage {x['stage']}" for x in s["notice"]["listed"])
            lines.append(f"  in grouped notice {s['notice']['id']} ({s['notice']['state']}), one email listing "
                         f"{listed}")
        if s.get("fee"):
            lines.append(f"  late fee {s['fee']['amount']} ({s['fee']['rule']}), recorded once with the stage")
        if s["smtp_reply"] and s["state"] != "failed":
            lines.append(f"  server's reply: {s['smtp_reply']}")
        if s["message"]:
            kept = "bytes kept" if s["message"]["bytes_kept"] else "bytes not kept after delivery"
            lines.append(f"  message SHA-256 {s['message']['sha256']} ({s['message']['size']} bytes, {kept})")
            for name, value in s["message"].get("headers") or []:  # who got it and what it said (no body)
                if name.lower() in _SUMMARY_HEADERS:
                    lines.append(f"  {name}: {value}")
        if s["in_doubt"]:
            res = s["in_doubt"]["resolution"]
            lines.append(f"  was in doubt: {s['in_doubt']['detail']}" + (
                f"; resolved {res['outcome']} at {res['at']['utc']} by {_by(res['by'])}" if res else "; unresolved"))
        p = s["provenance"]
        ids = [f"reminder {p['reminder_id']}" if p["reminder_id"] is not None
               else f"recorded in reminder {p['recorded_in_reminder']}"]
        if p["occurrence"]:
            ids.append(f"occurrence {p['occurrence']['id']} ({p['occurrence']['schedule_key']}, scan job "
                       f"{p['occurrence']['scan_job_id']})")
        if p["send_jobs"]:
            ids.append("send job " + ", ".join(str(j["id"]) for j in p["send_jobs"]))
        if p["effect"]:
            ids.append(f"effect {p['effect']['key']} ({p['effect']['state']}, job {p['effect']['job_id']} attempt "
                       f"{p['effect']['attempt']})")
        lines.append("  " + "; ".join(ids))
    return lines


def _by(by: Any) -> str:
    """Who resolved: an operator's detail (via, user) or a word."""
    if isinstance(by, dict):
        return f"{by.get('user') or 'someone'} via {by.get('via')}"
    return str(by)
