"""The send job's two hooks for attachments: add them before the message is frozen, record what was frozen.

Exactly-once with attachments rests on the effect ledger's frozen input (:mod:`oncebeat.effects`, rule 2): the
first attempt of ``reminder:<id>`` stores the whole message, attachments included, with its claim; every later
attempt (a retry after a refused connection, a take-over after a crash before the final dot, an operator's
``not_done``) sends those stored bytes. So :func:`with_attachments` builds the attachments only when no attempt
has frozen the message yet: the statement is generated once, never regenerated on a retry (it would differ: a
payment since, a new creation date), and an invoice PDF replaced on disk after the first attempt is not read
again. :func:`record_attachments` keeps the frozen message's files (name, type, size, SHA-256, bytes) for the
invoice page, since the ledger drops its frozen copy once the email is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from ...effects import EffectAttempt, EffectLedger
from ...errors import DeliveryUnknown, EffectOutcomeUnknown
from ...mail import Mailer, envelope_of_bytes, with_recipients
from ...provenance import current_source
from ...ratelimit import RateLimit
from ...store import Store
from ...timebase import Clock
from ..translations import DEFAULT_FALLBACK_LOCALE
from .attachments import Attachment, AttachmentError, AttachmentPolicy, attach, attachments_of, read_invoice_pdf
from .statement import statement_pdf

if TYPE_CHECKING:
    from ...worker import JobContext

__all__ = ["attachment_digests", "attachments_for", "files_for", "record_attachments", "reminder_attachment",
           "reminder_attachments", "send_frozen", "with_attachments"]


def attachments_for(store: Store, policy: AttachmentPolicy, r: Mapping[str, Any], *, stages: Sequence[int],
                    company: str, fallback_locale: str = DEFAULT_FALLBACK_LOCALE) -> list[Attachment]:
    """The files reminder row ``r`` (as ``get_reminder_for_send`` reads it) carries under ``policy``: the invoice
    PDF first, then the statement as of the reminder's business date.

    Raises:
        AttachmentError: a file cannot be read or made, or all of them together pass ``max_attachment_bytes``
            (the text names the invoice and the file).
    """
    return files_for(store, policy, [r], stages=stages, customer=r, business_date=r["business_date"],
                     company=company, fallback_locale=fallback_locale, label=f"invoice {r['number']!r}")


def files_for(store: Store, policy: AttachmentPolicy, rows: Sequence[Mapping[str, Any]], *, stages: Sequence[int],
              customer: Mapping[str, Any], business_date: date, company: str, fallback_locale: str,
              label: str) -> list[Attachment]:
    """The files of one message listing ``rows`` (``number``, ``stage``, ``pdf_path``) to ``customer``
    (``email``, ``name``, ``locale``): each invoice's PDF once, in listing order, then one statement as of
    ``business_date`` when any row's stage wants one; all within ``max_attachment_bytes``. ``label`` names the
    message in an error (``invoice 'INV-1'``, ``notice of invoices INV-1, INV-2``).

    Raises:
        AttachmentError: a file cannot be read or made, or the files together pass the limit.
    """
    found: list[Attachment] = []
    left = policy.max_attachment_bytes
    if policy.invoice_pdf:
        first: dict[str, Mapping[str, Any]] = {}
        for r in rows:  # an invoice listed at two stages carries its PDF once
            first.setdefault(str(r["number"]), r)
        for r in first.values():
            pdf = read_invoice_pdf(policy, number=r["number"], pdf_path=r.get("pdf_path"), limit=left)
            found.append(pdf)
            left -= pdf.size
    if any(policy.wants_statement(int(r["stage"]), stages) for r in rows):
        statement = statement_pdf(store, email=customer["email"], customer_name=customer["name"],
                                  locale=customer.get("locale"), company=company, as_of=business_date,
                                  fallback_locale=fallback_locale)
        if statement.size > left:
            raise AttachmentError(f"{label}: the statement {statement.filename!r} has {statement.size} bytes, over "
                                  f"the {left} bytes left of [attachments] max_attachment_bytes "
                                  f"({policy.max_attachment_bytes}); raise the limit")
        found.append(statement)
    return found


def with_attachments(store: Store, clock: Clock, policy: AttachmentPolicy | None, r: Mapping[str, Any], *,
                     key: str, data: bytes, message_id: str, stages: Sequence[int], company: str,
                     fallback_locale: str = DEFAULT_FALLBACK_LOCALE) -> bytes:
    """``data`` (the built message) with the attachments of reminder row ``r``, as its effect ``key`` will freeze
    it; ``data`` unchanged when the policy attaches nothing to this stage, or when an earlier attempt already
    froze the message (the ledger sends those bytes: nothing is read or generated again).

    Raises:
        AttachmentError: as :func:`attachments_for`.
    """
    if policy is None or not policy.any_for(r["stage"], stages):
        return data
    earlier = EffectLedger(store, clock=clock, source=current_source("worker")).get(key)
    if earlier is not None and earlier.get("frozen") is not None:
        return data
    return attach(data, attachments_for(store, policy, r, stages=stages, company=company,
                                         fallback_locale=fallback_locale), seed=message_id)


def record_attachments(store: Store, *, reminder_id: int, frozen: bytes, now: datetime,
                       notice_id: int | None = None) -> int:
    """Record the attachments of reminder ``reminder_id``'s frozen message (as a mail client reads them back);
    recording the same message again changes nothing. Returns how many were recorded.

    ``notice_id``: the message is grouped notice ``notice_id``'s; its files are recorded only while that notice
    still lists the row, pending (0 otherwise). An attempt that stalled before this point, while a later attempt
    broke the notice up and forgot its files, would otherwise leave the files of a message that was never sent on a
    row that then goes out alone (and, recorded first, they would keep that row's own files out).
    """
    found = attachments_of(frozen)
    if found:
        with store.transaction() as tx:
            if notice_id is not None and tx.one("notice_row_still_listed", reminder_id=reminder_id,
                                                notice_id=notice_id) is None:
                return 0
            tx.many("record_reminder_attachment", [
                {"reminder_id": reminder_id, "position": n, "filename": a.filename, "content_type": a.content_type,
                 "size": a.size, "sha256": a.sha256, "content": a.data, "now": now} for n, a in enumerate(found)])
    return len(found)


def reminder_attachments(store: Store, invoice_id: int) -> dict[int, list[dict[str, Any]]]:
    """The recorded attachments of invoice ``invoice_id``'s reminders, by reminder id (no bytes): ``[{position,
    filename, content_type, size, sha256, recorded_at}]``."""
    out: dict[int, list[dict[str, Any]]] = {}
    for row in store.read("reminder_attachments_of_invoice", invoice_id=invoice_id):
        out.setdefault(int(row["reminder_id"]), []).append(row)
    return out


def reminder_attachment(store: Store, reminder_id: int, position: int) -> dict[str, Any] | None:
    """One recorded attachment with its bytes (``content``), or None."""
    rows = store.read("reminder_attachment", reminder_id=reminder_id, position=position)
    if not rows:
        return None
    return rows[0] | {"content": bytes(rows[0]["content"])}


def attachment_digests(store: Store) -> dict[int, list[str]]:
    """Reminder id -> the SHA-256 of each file its frozen message carried, in order (every reminder)."""
    out: dict[int, list[str]] = {}
    for row in store.read("reminder_attachment_digests"):
        out.setdefault(int(row["reminder_id"]), []).append(str(row["sha256"]))
    return out


def send_frozen(ctx: JobContext, mailer: Mailer, attempt: EffectAttempt, *, data: bytes, envelope: Any,
                bcc: Sequence[str], relay: RateLimit | None) -> str:
    """Send an effect attempt's frozen message (a reminder's or a grouped notice's) and return the server's reply.

    ``data``/``envelope``: the message this attempt built and its envelope (``build_message_envelope``); when an
    earlier attempt froze other bytes (another Date), the mailer reads that message's own envelope, with the
    ``bcc`` addresses added back (they are envelope recipients only, never in the bytes). ``relay``: the relay's
    rate limit, whose permit is taken on an open connection and held until the send ended (sent or not: the relay
    saw it); none free raises ``RateLimited`` (a snooze).

    Raises:
        EffectOutcomeUnknown: the final "." went out and no reply came: the caller records it in doubt, never
            resending blindly (G4).
    """
    assert attempt.frozen is not None
    known = envelope if attempt.frozen == data else \
        with_recipients(envelope_of_bytes(attempt.frozen), bcc) if bcc else None
    with ExitStack() as permit:
        def take() -> None:
            if relay is not None:
                permit.enter_context(ctx.rate_limit(relay))

        try:
            return mailer.send(attempt.frozen, before_final_dot=attempt.point_of_no_return, envelope=known,
                               before_transaction=take)
        except DeliveryUnknown as exc:
            raise EffectOutcomeUnknown(str(exc)) from exc
