"""One notice per customer (issue 24 item 1; DESIGN G9): ``group = "customer"`` in a ladder.

The scan creates the (invoice, stage) rows as always (``UNIQUE (invoice_id, stage)``) and their send jobs. The send
job of a row whose ladder version groups does not send: it opens the notice of (customer, business date, ladder
version) — ``notices``, unique on those three, so duplicate scans, leftover triggers and manual runs make one — and
enqueues that notice's job (``reminders.send_notice``, unique key ``notice:<id>``). The notice's job then:

1. before anything was claimed: waits out the send window and the payment-freshness fence (as a send does: while
   the payment source of any open invoice it would list is stale, :func:`.capfence.check_notice_fence`); in ONE
   transaction (the notice locked) re-reads each of the customer's rows of that date and version: an invoice paid
   or voided → the row ``skipped``, covered by a hold → ``held`` (left out, never listed stale), the rest listed
   (``reminders.notice_id``); from then on the notice lists exactly those (``assigned_at``) and a row that comes
   due later for that date goes out on its own. Nothing left: the notice is ``skipped``;
2. takes ONE place under the customer's cap for the notice (:func:`.capfence.claim_notice_place`: one grouped
   email counts as one notice), or defers every row it lists to the next allowed day;
3. renders ONE email listing the rows (:mod:`.grouped`) and sends it as ONE effect, ``notice:<id>``, frozen at its
   first attempt (the outbox): a retry sends the same bytes; once frozen the notice is never re-grouped. The
   escalation of every listed (invoice, stage) (:mod:`.escalation`) applies: its ``Cc`` is the union of their CC
   addresses, its envelope also carries the union of their BCC addresses (never a header; added again to the
   envelope of frozen bytes on a retry), and each row whose stage has a late fee shows it (with totals per
   currency) and carries it in the ``X-Oncebeat-Fees`` header (:func:`.fees.fees_header`), so the fee recorded
   is the one the frozen message told the customer. Under ``[attachments]`` it carries each listed invoice's PDF
   and ONE statement (:mod:`.grouped_files`), built before the freeze, recorded for every listed row;
4. records the notice and every row it lists ``sent``, with the notice's Message-ID, in the transaction that
   records the effect done, and in it, per row, what a sent stage sets off (:func:`.notify.after_sent`, through
   ``ReminderService._after_sent`` as a single send does): its late fee (one per (invoice, stage)) and, at its
   ladder's final stage, the internal notice. A lost reply after the final dot (or a death after it) leaves the
   notice and ALL its rows ``in_doubt``, never resent blindly; ``oncebeat effects resolve notice:<id>
   done|not_done`` settles the notice and every row at once (:func:`resolve_notice`), ``done`` with the fees.

A mail outage, a relay limit or a refused connection waits (snoozed), as a send does; a permanent refusal fails
the notice and its rows.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ... import telemetry
from ...effects import EffectAttempt, EffectLedger
from ...errors import (
    ConnectionCapped,
    Discard,
    EffectInDoubt,
    EffectKeyConflict,
    JobSignal,
    LeaseLost,
    OncebeatError,
    PermanentMailError,
    Snooze,
    TransientMailError,
)
from ...mail import address_problem, build_message_envelope, make_message_id, parse_address
from ...provenance import Source, current_source
from ...queue import Queue
from ...store import Tx
from .. import capfence
from ..policy import format_duration
from .attachments import AttachmentError
from .digest import message_facts
from .fees import FEES_HEADER, Fee, fees_header
from .grouped import render_notice
from .grouped_files import notice_wants, with_notice_attachments
from .sending import record_attachments, send_frozen

if TYPE_CHECKING:
    from ...worker import JobContext
    from ..service import ReminderService

__all__ = ["SEND_NOTICE_TASK", "email_key", "groups", "join_notice", "notice_id_of_key", "notice_key",
           "notices_of_invoice", "resolve_notice", "send_notice"]

log = logging.getLogger("oncebeat.reminders")

SEND_NOTICE_TASK = "reminders.send_notice"
CAPPED_WAIT = 0.5  # seconds before a notice refused one more SMTP connection tries again


def notice_key(notice_id: int) -> str:
    """The effect key of notice ``notice_id``: ``notice:<id>``."""
    return f"notice:{int(notice_id)}"


def email_key(row: dict[str, Any]) -> str:
    """The effect key of the email reminder row ``row`` went out in (or will): its notice's (``notice:<id>``) when
    a grouped notice lists it, else its own (``reminder:<id>``)."""
    from ..model import reminder_key

    return notice_key(row["notice_id"]) if row.get("notice_id") is not None else reminder_key(int(row["id"]))


def notice_id_of_key(key: str) -> int | None:
    """The notice id of effect key ``notice:<id>``, else None."""
    prefix, _, rest = key.partition(":")
    return int(rest) if prefix == "notice" and rest.isdigit() else None


def groups(service: ReminderService, r: dict[str, Any]) -> bool:
    """Whether reminder row ``r`` (``get_reminder_for_send``) was created under a ladder version with
    ``group = "customer"`` (a version never changes: read once per process)."""
    version_id = r.get("ladder_version_id")
    if version_id is None:
        return False
    settings = service._settings_of(int(version_id))
    return settings is not None and settings.group == "customer"


def join_notice(service: ReminderService, reminder_id: int, r: dict[str, Any]) -> str | None:
    """The send job of grouped reminder ``reminder_id``: open its notice and enqueue the notice's job (both
    idempotent). Returns ``"pending"`` (the notice's job decides the row), or None when the notice's rows were
    already chosen without it (it came due later that day): the caller sends it on its own."""
    now = service.clock.now()
    with service.store.transaction() as tx:
        owner = tx.one("notice_row_owner", id=reminder_id)
        if owner is None:
            return None
        notice_id = owner["notice_id"]
        if notice_id is None:
            notice = tx.one("notice_open", customer_id=owner["customer_id"], business_date=r["business_date"],
                            ladder_version_id=r["ladder_version_id"], now=now)
            if notice is None or notice["assigned_at"] is not None:
                return None
            notice_id = notice["id"]
        _enqueue(service, tx, int(notice_id), current_source("worker"))
    return "pending"


def _enqueue(service: ReminderService, tx: Tx, notice_id: int, source: Source) -> None:
    from ..service import SEND_MAX_ATTEMPTS

    Queue(service.store, clock=service.clock, source=source).enqueue(
        SEND_NOTICE_TASK, {"notice_id": notice_id}, tx=tx, max_attempts=SEND_MAX_ATTEMPTS,
        unique_key=notice_key(notice_id))


def send_notice(service: ReminderService, ctx: JobContext, notice_id: int) -> str:
    """The ``reminders.send_notice`` task's body; returns the notice's final state (``pending`` while it waits)."""
    rows = service.store.read("notice_get", id=notice_id)
    if not rows:
        raise Discard(f"notice {notice_id} does not exist")
    n = rows[0]
    if n["state"] != "pending":
        return str(n["state"])
    try:
        return _send(service, ctx, n)
    except (JobSignal, LeaseLost):  # Retry, Snooze, Discard steer the job; LeaseLost: no longer ours
        raise
    except Exception as exc:  # never leave a notice pending when its job gives up (G6)
        if ctx.job.attempt >= ctx.job.max_attempts and ctx.effect_state(notice_key(notice_id)) in (None, "failed"):
            return _finish(service, n["id"], "failed", f"gave up after {ctx.job.attempt} attempts: "
                           f"{type(exc).__name__}: {exc}")
        raise


def _send(service: ReminderService, ctx: JobContext, n: dict[str, Any]) -> str:
    from ..service import _mailbox

    notice_id = int(n["id"])
    key = notice_key(notice_id)
    ledger = EffectLedger(service.store, clock=service.clock, source=current_source("worker"))
    claimed = ledger.get(key) is not None  # an attempt froze the message: it lists what it froze, as frozen
    message_id = make_message_id(f"notice:{n['customer_id']}:{n['business_date']}:{n['ladder_version_id']}",
                                 service.message_domain)
    if not claimed:
        wait = service._window_wait(n)
        if wait > 0:
            raise Snooze(f"outside the send window; it opens in {format_duration(wait)}", delay=wait)
        if service.policy.max_payment_staleness is not None:  # waits while any listed invoice's source is stale
            stale = capfence.check_notice_fence(service.store, service.policy, clock=service.clock,
                                                invoice_ids=_candidate_invoices(service, n))
            if stale is not None:
                _wait(service, notice_id, capfence.WAITING + stale, outage=False)
                raise Snooze(stale, delay=capfence.fence_poll(service.policy.max_payment_staleness))
        listed = _choose_rows(service, n, key=key, message_id=message_id)
        if not listed:
            return _finish(service, notice_id, "skipped", "no invoice left to remind: each was paid, voided or held "
                           "before the notice was sent")
        problem = address_problem(n["email"])
        if problem is not None:  # no attempt can ever deliver it
            return _finish(service, notice_id, "failed", f"undeliverable address {n['email']!r}: {problem}")
        capfence.claim_notice_place(service.store, service.policy, clock=service.clock, notice_id=notice_id,
                                    customer_id=int(n["customer_id"]), customer_tz=n.get("tz"),
                                    row_ids=[int(r["id"]) for r in listed],
                                    ladder=service._settings_of(n["ladder_version_id"]))
    members = service.store.read("notice_rows", notice_id=notice_id)
    listed = [r for r in members if r["state"] == "pending"]
    if not listed:  # every row was decided meanwhile (an operator, an earlier attempt)
        return _finish(service, notice_id, "skipped", "no row left to send")
    sender, reply_to, renderer = service._ladder_mail_of(n["ladder_version_id"])
    cc, _, fees = _escalation(service, listed)
    _, bcc, _ = _escalation(service, members)  # every row it froze with: a retry's envelope gets all their BCC
    rendered = render_notice(renderer, customer_name=n["name"], customer_locale=n["locale"],
                             business_date=n["business_date"], rows=listed, fees=fees)
    numbers = [str(r["number"]) for r in listed]
    data, envelope = build_message_envelope(
        sender=sender, to=_mailbox(n["name"], n["email"]), subject=rendered.subject, text=rendered.text,
        html=rendered.html, message_id=message_id, reply_to=reply_to, date=service.clock.now(),
        headers={"X-Oncebeat-Notice": str(notice_id), "X-Oncebeat-Invoices": ", ".join(numbers)}
        | ({FEES_HEADER: fees_header(fees)} if fees else {}), cc=cc, bcc=bcc)
    attachments, stages = service.policy.attachments, service._escalations_of(n["ladder_version_id"])[0]
    if notice_wants(attachments, listed, stages):
        try:  # each invoice's PDF and one statement, built once: a retry sends the frozen bytes (grouped_files)
            data = with_notice_attachments(
                service.store, service.clock, attachments, listed, key=key, data=data, message_id=message_id,
                stages=stages, customer=n, business_date=n["business_date"], company=service.policy.company,
                fallback_locale=service.policy.fallback_locale)
        except AttachmentError as exc:  # never send a notice without the files it promises: failed, visibly
            return _finish(service, notice_id, "failed", str(exc))
    mailer = service.mailer
    if mailer is None:
        raise Discard("no SMTP_URL configured for this worker")
    relay = service.relay_limit()

    def deliver(attempt: EffectAttempt) -> dict[str, Any]:
        assert attempt.frozen is not None  # the notice as first frozen: a retry sends exactly these bytes
        if attempt.taken_over:  # an earlier attempt failed or died before its point of no return: still due?
            stale = _stale_rows(service, notice_id)
            if stale:
                raise _NoticeStale(stale)  # recorded failed: nothing was sent
        for r in listed:  # each row keeps the files its notice carried (the invoice page, evidence)
            record_attachments(service.store, reminder_id=int(r["id"]), frozen=attempt.frozen,
                               now=service.clock.now(), notice_id=notice_id)
        reply = send_frozen(ctx, mailer, attempt, data=data, envelope=envelope, bcc=bcc, relay=relay)
        return {"message_id": message_id, "reply": reply, "invoices": numbers,
                "message_facts": message_facts(attempt.frozen)}

    recorded: list[list[int]] = []  # the stages of the rows this attempt recorded sent

    def mark_sent(tx: Tx, result: Any) -> None:  # commits with the effect's done: the notice, every row, their fees
        recorded.append(_settle(service, tx, notice_id, "sent", None, message_id=message_id, from_state="pending",
                                facts=result.get("message_facts"), source=ctx.source))

    if not claimed:  # the rows were chosen in this attempt: the message is frozen now, by the claim below
        with service.store.transaction() as tx:
            tx.run("notice_frozen", id=notice_id, now=service.clock.now())
    try:
        done = ctx.effect(key, deliver, payload={"notice": notice_id, "to": n["email"]}, freeze=lambda: data,
                   marks_point_of_no_return=True, resource=mailer.reserved(), skip=False, on_done=mark_sent)
    except EffectInDoubt as exc:
        return _finish(service, notice_id, "in_doubt", str(exc), message_id=message_id)
    except _NoticeStale as stale:
        return _break_up(service, notice_id, stale.rows)
    except EffectKeyConflict as exc:
        return _finish(service, notice_id, "failed", str(exc))
    except PermanentMailError as exc:
        return _finish(service, notice_id, "failed", f"SMTP rejected: {exc}")
    except ConnectionCapped as exc:
        raise Snooze(f"waiting for a free SMTP connection: {exc}", delay=CAPPED_WAIT) from exc
    except TransientMailError as exc:
        return _wait_out_outage(service, notice_id, exc)
    if not recorded:  # done by an earlier attempt or a reconcile
        return _finish(service, notice_id, "sent", None, message_id=message_id, source=ctx.source,
                       facts=done.get("message_facts") if isinstance(done, dict) else None)
    _finished(recorded[0], "sent")
    return "sent"


def _escalation(service: ReminderService, rows: list[dict[str, Any]]) -> tuple[list[str], list[str],
                                                                                dict[int, Fee]]:
    """(CC, BCC, fees by reminder id) of notice rows ``rows``: the union of each (invoice, stage)'s escalation in
    its pinned ladder version (addresses in order of first appearance, repeats dropped), and each row's late fee
    as its rule gives it now (rows without one left out)."""
    cc: dict[str, str] = {}  # address (lower case) -> the mailbox as first written
    bcc: dict[str, str] = {}
    fees: dict[int, Fee] = {}
    for r in rows:
        esc, fee = service._escalation_and_fee(r)
        if esc is not None:
            for found, mailboxes in ((cc, esc.cc), (bcc, esc.bcc)):
                for mailbox in mailboxes:  # checked by the policy: parses
                    found.setdefault(parse_address(mailbox, field="cc").addr_spec.lower(), mailbox)
        if fee is not None:
            fees[int(r["id"])] = fee
    return list(cc.values()), [m for a, m in bcc.items() if a not in cc], fees


def _candidate_invoices(service: ReminderService, n: dict[str, Any]) -> list[int]:
    """The open invoices notice ``n`` would list now (the payment-freshness fence reads their sources)."""
    rows = service.store.read("notice_candidates", notice_id=n["id"], customer_id=n["customer_id"],
                              business_date=n["business_date"], ladder_version_id=n["ladder_version_id"],
                              open=1 if n["assigned_at"] is None else 0)
    return sorted({int(r["invoice_id"]) for r in rows if r["status"] == "open"})


def _choose_rows(service: ReminderService, n: dict[str, Any], *, key: str, message_id: str) -> list[dict[str, Any]]:
    """Re-read the notice's candidate rows and choose what it lists, in one transaction with the notice locked:
    paid or voided → ``skipped``, held → ``held``, the rest listed. Returns the listed rows."""
    now = service.clock.now()
    listed: list[dict[str, Any]] = []
    with service.store.transaction() as tx:
        notice = tx.one("notice_lock", id=n["id"])
        if notice is None or notice["state"] != "pending":
            return []
        candidates = tx.run("notice_candidates", notice_id=n["id"], customer_id=n["customer_id"],
                            business_date=n["business_date"], ladder_version_id=n["ladder_version_id"],
                            open=1 if notice["assigned_at"] is None else 0)
        for r in candidates:
            if r["state"] == "deferred":
                tx.run("cap_wake", id=r["id"], now=now)
            if r["status"] != "open":
                reason = f"invoice {r['status']}" + (f" on {r['paid_on'].isoformat()}" if r["paid_on"] else "")
                tx.run("finish_reminder", id=r["id"], state="skipped", reason=reason, message_id=None,
                       sent_at=None, now=now, from_state="pending")
                tx.run("notice_release", id=r["id"], notice_id=n["id"])
                continue
            hold = tx.run("covering_hold", invoice_id=r["invoice_id"], business_date=r["business_date"])
            if hold:
                tx.run("hold_reminder", id=r["id"], hold_id=hold[0]["id"], reason=hold[0]["reason_text"], now=now)
                tx.run("notice_release", id=r["id"], notice_id=n["id"])
                continue
            if tx.one("notice_assign", id=r["id"], notice_id=n["id"], now=now) is not None:
                listed.append(r)
        tx.run("notice_assigned", id=n["id"], key=key, message_id=message_id, now=now)
    return listed


class _NoticeStale(Exception):
    """An invoice the frozen notice lists was paid, voided or held after the freeze, before any attempt reached
    the server: the frozen message would be stale, so it is not sent."""

    def __init__(self, rows: list[tuple[dict[str, Any], str, Any]]) -> None:
        self.rows = rows
        super().__init__(", ".join(f"{r['number']} {kind}" for r, kind, _ in rows))


def _stale_rows(service: ReminderService, notice_id: int) -> list[tuple[dict[str, Any], str, Any]]:
    """The pending rows of notice ``notice_id`` no longer to send: ``(row, "skipped", reason)`` for an invoice
    paid or voided, ``(row, "held", hold)`` for one a hold covers."""
    stale: list[tuple[dict[str, Any], str, Any]] = []
    for r in service.store.read("notice_rows", notice_id=notice_id):
        if r["state"] != "pending":
            continue
        if r["status"] != "open":
            stale.append((r, "skipped", f"invoice {r['status']}"
                          + (f" on {r['paid_on'].isoformat()}" if r["paid_on"] else "")))
            continue
        hold = service.store.read("covering_hold", invoice_id=r["invoice_id"], business_date=r["business_date"])
        if hold:
            stale.append((r, "held", hold[0]))
    return stale


def _break_up(service: ReminderService, notice_id: int, stale: list[tuple[dict[str, Any], str, Any]]) -> str:
    """A frozen notice went stale before any attempt reached the server (:class:`_NoticeStale`): it is never sent
    (``skipped``); the stale rows are recorded skipped or held, and every other row it listed goes out on its own
    (released from the notice, its send job enqueued): nothing is listed stale, nothing is lost. The files the
    first attempt recorded on the rows (the notice's) are forgotten: each row records those of what it is sent."""
    from ..model import reminder_key
    from ..service import SEND_MAX_ATTEMPTS, SEND_TASK

    now = service.clock.now()
    queue = Queue(service.store, clock=service.clock, source=current_source("worker"))
    with service.store.transaction() as tx:
        for r, kind, detail in stale:
            if kind == "held":
                tx.run("hold_reminder", id=r["id"], hold_id=detail["id"], reason=detail["reason_text"], now=now)
            else:
                tx.run("finish_reminder", id=r["id"], state="skipped", reason=detail, message_id=None, sent_at=None,
                       now=now, from_state="pending")
            tx.run("notice_release", id=r["id"], notice_id=notice_id)
        rest = [int(x["id"]) for x in tx.run("notice_release_pending", notice_id=notice_id)]
        # The first attempt recorded the notice's files on each row it listed; none of them reached the server,
        # so no row keeps them: a skipped row has no files, a released one records those of its own message.
        for rid in [int(r["id"]) for r, _, _ in stale] + rest:
            tx.run("forget_reminder_attachments", reminder_id=rid)
        tx.run("notice_finish", id=notice_id, state="skipped", reason=(
            "not sent: " + ", ".join(f"{r['number']} {kind}" for r, kind, _ in stale) + " after the notice was "
            "frozen and before any attempt reached the server; the other invoices go out on their own"),
            message_id=None, sent_at=None, now=now, from_state="pending")
        for rid in rest:
            queue.enqueue(SEND_TASK, {"reminder_id": rid}, tx=tx, max_attempts=SEND_MAX_ATTEMPTS,
                          unique_key=reminder_key(rid))
    log.info("notice %s not sent (stale after its freeze); %d invoice(s) go out on their own", notice_id,
             len(rest), extra={"event": "reminders.notice", "notice_id": notice_id})
    return "skipped"


def _settle(service: ReminderService, tx: Tx, notice_id: int, state: str, reason: str | None, *,
            message_id: str | None = None, from_state: str = "pending", facts: dict[str, Any] | None = None,
            source: Source | None = None) -> list[int]:
    """Notice ``notice_id`` and every row it lists in ``from_state`` become ``state`` (one transaction). Returns
    the stages of the rows that changed.

    Moved to ``sent``: each row that moved gets, in ``tx``, what a sent stage sets off (its late fee, the final
    stage's internal notice: ``ReminderService._after_sent``, as a single send); ``facts``: the sent message's
    :func:`~.digest.message_facts` (its ``X-Oncebeat-Fees`` is what the customer was told), None when no copy of
    it is left (each fee then as its pinned rule gives it); ``source``: who caused it (G8).
    """
    now = service.clock.now()
    sent_at = now if state == "sent" else None
    tx.run("notice_finish", id=notice_id, state=state, reason=reason, message_id=message_id, sent_at=sent_at,
           now=now, from_state=from_state)
    if state not in ("sent", "in_doubt", "failed", "pending"):
        return []
    moved = tx.run("notice_finish_rows", notice_id=notice_id, state=state, reason=reason, message_id=message_id,
                   sent_at=sent_at, now=now, from_state=from_state)
    if state == "sent" and moved:
        ids = {int(r["id"]) for r in moved}
        for row in tx.run("notice_rows", notice_id=notice_id):
            if int(row["id"]) in ids:
                service._after_sent(tx, row, facts=facts, source=source)
    return [int(r["stage"]) for r in moved]


def _finished(stages: list[int], state: str) -> None:
    """Each row a notice decided counts as a reminder finished (``/metrics``), as a send's does."""
    for stage in stages:
        telemetry.emit("reminder.finished", {"stage": stage, "state": state})


def _finish(service: ReminderService, notice_id: int, state: str, reason: str | None, *,
            message_id: str | None = None, facts: dict[str, Any] | None = None, source: Source | None = None) -> str:
    with service.store.transaction() as tx:
        stages = _settle(service, tx, notice_id, state, reason, message_id=message_id, facts=facts, source=source)
    _finished(stages, state)
    log.info("notice %s %s%s", notice_id, state, f": {reason}" if reason else "",
             extra={"event": "reminders.notice", "notice_id": notice_id})
    return state


def _wait(service: ReminderService, notice_id: int, reason: str, *, outage: bool) -> Any:
    with service.store.transaction() as tx:
        return tx.one("notice_wait", id=notice_id, reason=reason[:2000], outage=1 if outage else 0,
                      now=service.clock.now())


def _wait_out_outage(service: ReminderService, notice_id: int, exc: TransientMailError) -> str:
    """As a send does (:meth:`ReminderService._wait_out_outage`): snooze until ``outage_retry`` passed since the
    first refusal, then record the notice and its rows ``failed``."""
    from ..service import outage_wait

    row = _wait(service, notice_id, f"mail outage: {exc}", outage=True)
    if row is None or row["deferred_since"] is None:
        return str(service.store.read("notice_get", id=notice_id)[0]["state"])
    waited = (service.clock.now() - row["deferred_since"]).total_seconds()
    left = service.policy.outage_retry - waited
    if left <= 0:
        return _finish(service, notice_id, "failed", f"gave up after {format_duration(waited)} of mail outage: {exc}")
    raise Snooze(f"mail outage (since {row['deferred_since'].isoformat()}): {exc}", delay=outage_wait(waited, left))


def resolve_notice(service: ReminderService, key: str, outcome: str, *, source: Source) -> str:
    """An operator's decision on in-doubt notice ``key`` (``notice:<id>``): ``done`` → the notice and every row
    it lists ``sent``; ``not_done`` → all ``pending`` again and the notice's job runs again (it sends the frozen
    message). ``done`` records each row's late fee and final-stage internal notice as a sent notice does
    (:func:`_settle`). Returns a sentence.

    Raises:
        OncebeatError: the key is unknown or not in doubt.
        ValueError: ``outcome`` is neither ``done`` nor ``not_done``.
    """
    notice_id = notice_id_of_key(key)
    assert notice_id is not None
    ledger = EffectLedger(service.store, clock=service.clock, source=source)
    before = ledger.get(key)
    result = None
    if outcome == "done" and before is not None and before["state"] == "in_doubt" and before.get("frozen"):
        result = {"message_facts": message_facts(bytes(before["frozen"]))}
    with service.store.transaction() as tx:
        resolution = ledger.resolve(key, outcome, result, tx=tx)
        if resolution is None:
            raise OncebeatError(f"effect {key!r} is unknown or not in doubt; `oncebeat effects list "
                                "--state in_doubt` lists the keys that need a decision")
        rows = tx.run("notice_get", id=notice_id)
        if not rows or rows[0]["state"] != "in_doubt":
            return f"{key}: resolved {outcome} (notice {notice_id} was not in doubt)"
        if outcome == "done":  # the fees as the frozen notice showed them (no copy left: as each pinned rule gives)
            _settle(service, tx, notice_id, "sent", "resolved by operator: it was delivered", from_state="in_doubt",
                    facts=result["message_facts"] if result else None, source=source)
            return f"{key}: resolved done; notice {notice_id} and every invoice it lists are sent"
        _settle(service, tx, notice_id, "pending", "resolved by operator: not delivered; sending again",
                from_state="in_doubt")
        _enqueue(service, tx, notice_id, source)
        return f"{key}: resolved not_done; notice {notice_id} will be sent again"


def notices_of_invoice(service: ReminderService, invoice_id: int) -> dict[int, dict[str, Any]]:
    """The notices that listed invoice ``invoice_id``, by notice id: ``{"id", "state", "message_id",
    "business_date", "sent_at", "rows": [{"reminder_id", "number", "stage", "state"}]}`` (every row it listed,
    this invoice's included)."""
    out: dict[int, dict[str, Any]] = {}
    for r in service.store.read("notices_of_invoice", invoice_id=invoice_id):
        notice = out.setdefault(int(r["notice_id"]), {
            "id": int(r["notice_id"]), "state": r["notice_state"], "message_id": r["notice_message_id"],
            "business_date": r["business_date"], "sent_at": r["notice_sent_at"], "rows": []})
        notice["rows"].append({"reminder_id": int(r["reminder_id"]), "number": r["number"], "stage": int(r["stage"]),
                               "state": r["state"]})
    return out
