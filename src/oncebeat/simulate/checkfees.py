"""Late fees, once (issue 24.4, G9), for the invariant checker: judged from the policy's rules, the invoices,
the effect ledger and the Maildir, never from the reminders table.

Invariants:

- ``fee-once-per-stage``: at most one fee per (invoice, stage); each recorded fee is of a stage that was sent (its
  notice delivered to the Maildir — a grouped notice names the row in ``X-Oncebeat-Fees`` —, or its effect
  ``reminder:<id>`` done), whose stage has a fee rule in a ladder
  version the invoice was pinned to (or, never pinned, a ladder the policy files gave it), and its amount and
  currency are that rule's for the invoice's amount due (:meth:`~oncebeat.reminders.notices.escalation.FeeRule.
  amount`, recomputed here);
- ``fee-not-lost``: every delivered notice that showed a fee (``X-Oncebeat-Fee``; a grouped notice one per listed
  row in ``X-Oncebeat-Fees``, by reminder id) and whose effect (``reminder:<id>``, ``notice:<id>``) is done has
  that fee recorded, same amount, for that reminder: the notice and the record never disagree;
- ``final-notice-once``: the internal notices of final stages (``[reminders] notify_final``; header
  ``X-Oncebeat-Notice``: the customer notice's Message-ID) are delivered at most once per (invoice, final stage),
  each naming a customer notice that was delivered. An invoice an operator moved to a new ladder version may have
  two final stages (each version's last), so two notices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from ..mail import StoredMessage
from ..reminders.model import reminder_key
from ..reminders.notices.escalation import escalation_of
from ..reminders.notices.fees import FEE_HEADER, FEES_HEADER, Fee, fee_for, fees_of_header
from ..reminders.notices.grouping import notice_key
from .checkladders import LadderTimeline

__all__ = ["FEE_INVARIANTS", "FINAL_STAGE_HEADER", "INTERNAL_HEADER", "check_fees"]

FEE_INVARIANTS = ("fee-once-per-stage", "fee-not-lost", "final-notice-once")
#: The header of an internal notice (:mod:`oncebeat.reminders.notices.notify`): the Message-ID it reports on.
INTERNAL_HEADER = "X-Oncebeat-Notice"
#: The header only an internal notice carries (a grouped customer notice has ``X-Oncebeat-Notice`` too: its id).
FINAL_STAGE_HEADER = "X-Oncebeat-Final-Stage"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


def check_fees(inv: Mapping[str, _Invariant], *, fees: Sequence[dict[str, Any]], invoices: Mapping[str, dict[str, Any]],
               ladders: LadderTimeline | None, messages: Sequence[StoredMessage],
               effects: Mapping[str, dict[str, Any]], internal: Sequence[StoredMessage] = (),
               listed_by: Mapping[int, str] | None = None) -> int:
    """Both invariants over every recorded fee and every delivered notice; returns the fees recorded.

    ``fees``: :func:`~oncebeat.reminders.notices.fees.all_fees`; ``invoices``: number -> invoice row;
    ``ladders``: each invoice's pinned versions (None: no ladder is known, so every fee is unexpected);
    ``internal``: the delivered internal notices (``messages`` holds the customer notices only); ``listed_by``:
    reminder id -> the effect key of the grouped notice that lists it (``notice:<id>``).
    """
    listed_by = listed_by or {}
    once, lost = inv["fee-once-per-stage"], inv["fee-not-lost"]
    delivered = {(m.headers.get("X-Oncebeat-Invoice") or "", str(m.headers.get("X-Oncebeat-Stage") or ""))
                 for m in messages}
    # the rows grouped notices showed a fee for, by reminder id -> (the fee, the notice's effect key)
    grouped: dict[int, tuple[Fee, str]] = {}
    for m in messages:
        notice, listed = m.headers.get(INTERNAL_HEADER, "").strip(), m.headers.get(FEES_HEADER)
        if listed is not None and notice.isdigit():
            grouped.update((rid, (fee, notice_key(int(notice)))) for rid, fee in fees_of_header(listed).items())
    counts = Counter((str(f["number"]), int(f["stage"])) for f in fees)
    recorded: dict[tuple[str, int], dict[str, Any]] = {}
    for f in fees:
        number, stage = str(f["number"]), int(f["stage"])
        once.checked += 1
        recorded[(number, stage)] = f
        where = f"{number} stage {stage}: fee {f['amount']} {f['currency']}"
        if counts[(number, stage)] > 1:
            once.fail(f"{where} recorded {counts[(number, stage)]} times")
            continue
        rid = int(f["reminder_id"])
        effect = effects.get(listed_by.get(rid) or reminder_key(rid))  # a grouped row: its notice's effect
        if rid not in grouped and (number, str(stage)) not in delivered and (effect is None
                                                                            or effect["state"] != "done"):
            once.fail(f"{where} but the stage was never sent (no delivery, effect {effect and effect['state']})")
            continue
        expected = _expected(invoices.get(number), stage, ladders)
        if (int(f["amount"]), f["currency"]) not in expected:
            once.fail(f"{where} but the pinned rule gives {sorted(expected) or 'no fee'}")
    for m in messages:
        header = m.headers.get(FEE_HEADER)
        reminder = m.headers.get("X-Oncebeat-Reminder")
        if header is None or reminder is None or not reminder.isdigit():
            continue
        shown = Fee.from_header(header)
        effect = effects.get(reminder_key(int(reminder)))
        if shown is None or effect is None or effect["state"] != "done":
            continue  # in doubt or not finished: no fee may be recorded yet (the first invariant)
        lost.checked += 1
        pair = (m.headers.get("X-Oncebeat-Invoice") or "", int(m.headers.get("X-Oncebeat-Stage") or -10**6))
        got = recorded.get(pair)
        if got is None:
            lost.fail(f"{pair[0]} stage {pair[1]}: the notice showed a fee of {shown.amount} {shown.currency}, "
                      "none is recorded")
        elif (int(got["amount"]), got["currency"]) != (shown.amount, shown.currency):
            lost.fail(f"{pair[0]} stage {pair[1]}: the notice showed {shown.amount} {shown.currency}, the record "
                      f"says {got['amount']} {got['currency']}")
    by_reminder = {int(f["reminder_id"]): f for f in fees}
    for rid, (shown, key) in sorted(grouped.items()):
        effect = effects.get(key)
        if effect is None or effect["state"] != "done":
            continue  # in doubt or not finished: no fee may be recorded yet
        lost.checked += 1
        got = by_reminder.get(rid)
        if got is None:
            lost.fail(f"{key} reminder {rid}: the notice showed a fee of {shown.amount} {shown.currency}, none is "
                      "recorded")
        elif (int(got["amount"]), got["currency"]) != (shown.amount, shown.currency):
            lost.fail(f"{key} reminder {rid} ({got['number']} stage {got['stage']}): the notice showed "
                      f"{shown.amount} {shown.currency}, the record says {got['amount']} {got['currency']}")
    final = inv["final-notice-once"]
    notices = {m.message_id for m in messages}
    def final_of(m: StoredMessage) -> tuple[str, str]:
        return m.headers.get("X-Oncebeat-Invoice") or "", m.headers.get("X-Oncebeat-Final-Stage") or ""

    per_stage = Counter(final_of(m) for m in internal)
    for m in internal:
        final.checked += 1
        number, final_stage = final_of(m)
        if per_stage[(number, final_stage)] > 1:
            final.fail(f"{number}: {per_stage[(number, final_stage)]} internal notices of its final stage "
                       f"{final_stage}")
            per_stage[(number, final_stage)] = 1  # named once
        if m.headers.get(INTERNAL_HEADER, "").strip() not in notices:
            final.fail(f"{number}: an internal notice names {m.headers.get(INTERNAL_HEADER)!r}, no delivered notice")
    return len(fees)


def _expected(invoice: dict[str, Any] | None, stage: int, ladders: LadderTimeline | None) -> set[tuple[int, str]]:
    """(amount, currency) the fee rule of ``stage`` gives ``invoice`` under each ladder it may have been on."""
    if invoice is None or ladders is None:
        return set()
    out: set[tuple[int, str]] = set()
    for settings in ladders.candidates(invoice, _EPOCH, None):
        esc = escalation_of(settings.escalation, stage)
        fee = fee_for(esc.fee if esc else None, amount_due=int(invoice["amount_due"]), currency=invoice["currency"])
        if fee is not None:
            out.add((fee.amount, fee.currency))
    return out
