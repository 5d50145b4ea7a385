"""The checker's rules for holds and stage order (DESIGN.md G9), judged from the holds table, the invoices and
the effect ledger; the reminders table is only compared with them.

A hold covers business date ``D`` of an invoice when it is on that invoice or on its customer and
``D < resumes_on`` (None: until released). ``resumes_on`` only ever moves earlier (a release), so its final
value covers a date only if the hold covered it at every earlier instant after it was placed.

Invariants (name → meaning):

- ``held-by-a-hold``: every reminder recorded ``held`` names a hold on its invoice or customer, placed before
  it was recorded, that covers its business date, and its reason says that hold's reason and id;
- ``no-send-while-held``: no reminder was sent (or left in doubt) whose email was claimed while a hold covered
  it: no hold on its invoice or customer placed before the claim (the effect's start) covers its business date;
- ``stage-order``: per invoice, a higher stage's business date is never before a lower one's, and a higher stage
  went out only after every lower recorded stage had ended (sent, held, skipped, failed or in doubt);
- ``resume-marked``: the first reminder of an invoice after a hold ended (a promise passed, a release) records
  that hold (``resumes_hold_id``: the template's ``promise_missed``), and no other reminder does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, Protocol

from ..reminders.holds import Hold
from ..reminders.notices.grouping import email_key

__all__ = ["HOLD_INVARIANTS", "check_holds"]

HOLD_INVARIANTS = ("held-by-a-hold", "no-send-while-held", "stage-order", "resume-marked")
FINAL = ("sent", "held", "skipped", "failed", "in_doubt")


class _Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


def _holds_on(holds: Sequence[Hold], invoice: dict[str, Any]) -> list[Hold]:
    return [h for h in holds if h.invoice == invoice["number"] or (h.customer is not None
                                                                    and h.customer == invoice["email"])]


def _covers(h: Hold, day: date) -> bool:
    return h.resumes_on is None or day < h.resumes_on


def check_holds(inv: Mapping[str, _Invariant], *, holds: Sequence[Hold], invoices: dict[str, dict[str, Any]],
                reminders: list[dict[str, Any]], effects: dict[str, dict[str, Any]]) -> None:
    """Judge the four invariants of the module docstring; ``reminders`` as :func:`with_superseded` lists them."""
    by_invoice: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in reminders:
        by_invoice[r["number"]].append(r)
    for number, rows in by_invoice.items():
        on = _holds_on(holds, invoices[number]) if number in invoices else []
        for r in rows:
            if r["state"] == "held":
                _held(inv["held-by-a-hold"], r, on)
            elif r["state"] in ("sent", "in_doubt") and r.get("superseded_by") is None:
                _not_held(inv["no-send-while-held"], r, on, effects)
        _order(inv["stage-order"], number, rows)
        _resumed(inv["resume-marked"], rows, on)


def _held(held: _Invariant, r: dict[str, Any], on: list[Hold]) -> None:
    held.checked += 1
    where = f"{r['number']} stage {r['stage']} (held, {r['business_date']})"
    hold = next((h for h in on if h.id == r.get("hold_id")), None)
    if hold is None:
        held.fail(f"{where}: names hold {r.get('hold_id')}, which is not on its invoice or customer")
    elif hold.created_at > r["updated_at"]:
        held.fail(f"{where}: hold {hold.id} was placed at {hold.created_at.isoformat()}, after it was recorded")
    elif not _covers(hold, r["business_date"]):
        held.fail(f"{where}: hold {hold.id} ends before that date (resumes {hold.resumes_on})")
    elif f"(hold {hold.id})" not in (r["reason"] or "") or hold.reason not in (r["reason"] or ""):
        held.fail(f"{where}: reason {r['reason']!r} does not name hold {hold.id} ({hold.reason})")


def _not_held(sent: _Invariant, r: dict[str, Any], on: list[Hold], effects: dict[str, dict[str, Any]]) -> None:
    sent.checked += 1
    effect = effects.get(email_key(r))  # a grouped notice's rows: its effect
    claimed: datetime | None = effect["started_at"] if effect is not None else r.get("sent_at")
    if claimed is None:
        return
    for h in on:
        if h.created_at < claimed and _covers(h, r["business_date"]):
            sent.fail(f"{r['number']} stage {r['stage']} ({r['business_date']}) went out at {claimed.isoformat()} "
                      f"while hold {h.id} ({h.reason}, placed {h.created_at.isoformat()}) covered it")
            return


def _ended_at(r: dict[str, Any]) -> datetime | None:
    """When a recorded stage ended: its send, or the write that recorded it (None: not ended)."""
    if r["state"] not in FINAL:
        return None
    if r["state"] == "sent" and r.get("sent_at") is not None:
        return r["sent_at"]  # type: ignore[no-any-return]
    return r["updated_at"]  # type: ignore[no-any-return]


def _order(order: _Invariant, number: str, rows: list[dict[str, Any]]) -> None:
    ladder = sorted(rows, key=lambda r: int(r["stage"]))
    for lower, higher in zip(ladder, ladder[1:], strict=False):
        order.checked += 1
        where = f"{number} stage {higher['stage']} ({higher['state']}, {higher['business_date']})"
        if higher["business_date"] < lower["business_date"]:
            order.fail(f"{where} is dated before stage {lower['stage']} ({lower['business_date']})")
        elif higher["state"] == "sent" and higher.get("sent_at") is not None:
            ended = _ended_at(lower)
            if ended is None or ended > higher["sent_at"]:
                order.fail(f"{where} went out at {higher['sent_at'].isoformat()} before stage {lower['stage']} "
                           f"ended ({lower['state']})")


def _resumed(marked: _Invariant, rows: list[dict[str, Any]], on: list[Hold]) -> None:
    ended = [h for h in on if h.resumes_on is not None]
    real = sorted((r for r in rows if r.get("superseded_by") is None), key=lambda r: (r["business_date"], r["id"]))
    for r in real:
        if r["state"] == "held" or r["state"] == "pending":
            continue
        marked.checked += 1
        expected = None
        for h in sorted(ended, key=lambda h: (h.resumes_on, h.id), reverse=True):
            assert h.resumes_on is not None
            if h.resumes_on > r["business_date"]:
                continue
            # as the scan saw them: a stage recorded held after this reminder was created was pending then
            if not any(p["id"] != r["id"] and p["business_date"] >= h.resumes_on and p["created_at"] <= r["created_at"]
                       and (p["state"] != "held" or p["updated_at"] > r["created_at"]) for p in real):
                expected = h.id
                break
        if r.get("resumes_hold_id") != expected:
            marked.fail(f"{r['number']} stage {r['stage']} ({r['business_date']}) records resumed hold "
                        f"{r.get('resumes_hold_id')}, expected {expected}")
