"""What a sent stage sets off: its late fee and, at the final stage, the internal notice (issue 24.4, G9).

:func:`after_sent` runs in the transaction that records a reminder ``sent`` (the send job's effect ``on_done``,
a later job finding the effect done, an operator's "it was delivered"), and only when that transaction moved the
reminder to ``sent``; a grouped notice (:mod:`.grouping`) calls it for every row it moved to ``sent``, in the one
transaction recording the notice sent. In it:

- the stage's late fee is recorded (:func:`.fees.record_fee`): the fee the sent message carried in its
  ``X-Oncebeat-Fee`` header (a grouped notice: the row's entry in ``X-Oncebeat-Fees``), or, when no copy of the
  message is left (an in-doubt email resolved "done" after its bytes were dropped), the fee its pinned rule
  gives;
- at the final stage of the invoice's pinned ladder, with ``[reminders] notify_final`` set, one job of
  :data:`NOTIFY_TASK` is enqueued (unique per reminder). Its send is its own effect keyed
  ``notify-final:<invoice id>:<stage>`` (:func:`notify_key`): exactly one internal email per (invoice, final
  stage), whatever retries, crashes or reruns happen. It is a plain text email to the team's address naming the
  customer, the invoice, the amount, the fee and the Message-ID of the notice the customer got; the address is
  the one the policy named when the stage went out (stored in the job's arguments).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...effects import EffectAttempt
from ...errors import DeliveryUnknown, Discard, EffectOutcomeUnknown
from ...mail import Mailer, build_message_envelope, make_message_id, parse_address
from ...queue import Queue
from ...store import Store, Tx
from ..render import format_money
from .digest import message_facts
from .escalation import StageEscalation
from .fees import Fee, fee_for, fee_of_facts, record_fee

if TYPE_CHECKING:
    from ...worker import JobContext

__all__ = ["NOTIFY_MAX_ATTEMPTS", "NOTIFY_TASK", "after_sent", "notify_key", "send_notification"]

NOTIFY_TASK = "reminders.notify_final"
NOTIFY_MAX_ATTEMPTS = 12


def notify_key(invoice_id: int, stage: int) -> str:
    """The effect key of the internal notice of invoice ``invoice_id``'s final ``stage``."""
    return f"notify-final:{invoice_id}:{stage}"


def after_sent(tx: Tx, *, r: Mapping[str, Any], escalation: StageEscalation | None, facts: Mapping[str, Any] | None,
               final_stage: int, notify_to: str | None, queue: Queue | None, now: datetime) -> Fee | None:
    """Record reminder row ``r``'s fee and enqueue the final stage's internal notice, in ``tx`` (see the module).

    ``r``: the reminder (``id``, ``stage``, ``amount_due``, ``currency``), as ``get_reminder_for_send`` or, for a
    row a grouped notice lists, ``notice_rows`` reads it. ``facts``: the sent message's
    :func:`~.digest.message_facts` (None when no copy is left). ``queue``: enqueues the internal notice (needed
    with ``notify_to``). Returns the fee recorded now, else None.
    """
    if facts is not None:
        fee = fee_of_facts(facts, int(r["id"]))  # what the notice told the customer (a grouped one: this row's)
    else:
        fee = fee_for(escalation.fee if escalation else None, amount_due=int(r["amount_due"]), currency=r["currency"])
    recorded = fee if fee is not None and record_fee(tx, reminder_id=int(r["id"]), fee=fee, now=now) else None
    if notify_to and queue is not None and int(r["stage"]) == final_stage:
        queue.enqueue(NOTIFY_TASK, {"reminder_id": int(r["id"]), "to": notify_to}, tx=tx,
                      max_attempts=NOTIFY_MAX_ATTEMPTS, unique_key=f"notify:{int(r['id'])}")
    return recorded


def _body(r: Mapping[str, Any], fees: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        f"The final reminder for invoice {r['number']} went out.",
        "",
        f"Customer:    {r['name']} <{r['email']}>",
        f"Invoice:     {r['number']}",
        f"Amount due:  {format_money(int(r['amount_due']), r['currency'], 'en_US')}",
        f"Stage:       {r['stage']} days",
        f"Notice:      Message-ID {r['message_id']}",
    ]
    for f in fees:
        lines.append(f"Late fee:    {format_money(int(f['amount']), f['currency'], 'en_US')} at stage {f['stage']} "
                     f"({f['rule']})")
    lines += ["", "Sent by oncebeat (reminders.notify_final): one message per invoice and final stage."]
    return "\r\n".join(lines) + "\r\n"


def send_notification(ctx: JobContext, *, store: Store, mailer: Mailer | None, sender: str, message_domain: str,
                      reminder_id: int, to: str) -> str:
    """The :data:`NOTIFY_TASK` body: send the internal notice of reminder ``reminder_id`` to ``to`` once.

    Returns ``sent`` (this job or an earlier one sent it), or ``in_doubt`` (the ledger holds the key in doubt; an
    operator resolves it with ``oncebeat effects resolve``).

    Raises:
        Discard: the reminder is gone or not sent, or no SMTP_URL.
        TransientMailError, PermanentMailError: as :meth:`Mailer.send` (the job retries, then is discarded).
    """
    rows = store.read("get_reminder_for_send", id=reminder_id)
    if not rows or rows[0]["state"] != "sent":
        raise Discard(f"reminder {reminder_id} is not sent; no internal notice")
    if mailer is None:
        raise Discard("no SMTP_URL configured for this worker")
    r = rows[0]
    key = notify_key(int(r["invoice_id"]), int(r["stage"]))
    fees = store.read("fees_of_invoice", invoice_id=r["invoice_id"])
    data, envelope = build_message_envelope(
        sender=sender, to=parse_address(to, field="notify_final", deliverable=True),
        subject=f"Final reminder sent: invoice {r['number']} ({r['name']})", text=_body(r, fees), html=None,
        message_id=make_message_id(key, message_domain), date=ctx.clock.now(),
        headers={"X-Oncebeat-Invoice": r["number"], "X-Oncebeat-Final-Stage": str(r["stage"]),
                 "X-Oncebeat-Notice": str(r["message_id"] or "")})

    def deliver(attempt: EffectAttempt) -> dict[str, Any]:
        assert attempt.frozen is not None
        known = envelope if attempt.frozen == data else None  # frozen by an earlier attempt: its own envelope
        try:
            reply = mailer.send(attempt.frozen, before_final_dot=attempt.point_of_no_return, envelope=known)
        except DeliveryUnknown as exc:  # the final "." went out, but no reply: never resend blindly (G4)
            raise EffectOutcomeUnknown(str(exc)) from exc
        return {"reply": reply, "message_facts": message_facts(attempt.frozen)}

    done = ctx.effect(key, deliver, payload={"invoice": r["number"], "stage": r["stage"], "to": to},
                      freeze=lambda: data, marks_point_of_no_return=True, resource=mailer.reserved())
    return "in_doubt" if done is None and key in ctx.in_doubt else "sent"
