"""The files of a grouped notice (``group = "customer"`` with ``[attachments]``): each listed invoice's PDF, and ONE
statement for the notice.

A notice (:mod:`.grouping`) lists several (invoice, stage) rows of one customer. Under ``[attachments]`` it
carries, in listing order, the PDF of each invoice it lists (``invoice_pdf = true``; an invoice listed twice is
attached once) and, when the stage of any listed row wants one (``statement``), one statement of the customer's
account as of the notice's business date — never one per row. All files together stay within
``max_attachment_bytes``; a file that cannot be read or made, or would pass the limit, fails the notice (nothing
is sent, the text names the invoice and the file), as it fails a single reminder.

As for a single reminder (:mod:`.sending`), the files are built only before the notice's first attempt froze the
message: every retry sends the frozen bytes, files included, and nothing is read or generated again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from ...effects import EffectLedger
from ...provenance import current_source
from ...store import Store
from ...timebase import Clock
from ..translations import DEFAULT_FALLBACK_LOCALE
from .attachments import Attachment, AttachmentPolicy, attach
from .sending import files_for

__all__ = ["notice_attachments", "notice_wants", "with_notice_attachments"]


def notice_wants(policy: AttachmentPolicy | None, rows: Sequence[Mapping[str, Any]], stages: Sequence[int]) -> bool:
    """Whether a notice listing ``rows`` (each with its ``stage``) under a ladder of ``stages`` carries any file."""
    return policy is not None and any(policy.any_for(int(r["stage"]), stages) for r in rows)


def notice_attachments(store: Store, policy: AttachmentPolicy, rows: Sequence[Mapping[str, Any]], *,
                       stages: Sequence[int], customer: Mapping[str, Any], business_date: date, company: str,
                       fallback_locale: str = DEFAULT_FALLBACK_LOCALE) -> list[Attachment]:
    """The files of a notice listing ``rows`` (``notice_rows``: ``number``, ``stage``, ``pdf_path``) for
    ``customer`` (``email``, ``name``, ``locale``): each invoice's PDF in listing order, then one statement as of
    ``business_date`` when any row's stage wants one.

    Raises:
        AttachmentError: a file cannot be read or made, or all of them together pass ``max_attachment_bytes``
            (the text names the invoice and the file).
    """
    numbers = ", ".join(dict.fromkeys(str(r["number"]) for r in rows))
    return files_for(store, policy, rows, stages=stages, customer=customer, business_date=business_date,
                     company=company, fallback_locale=fallback_locale, label=f"notice of invoices {numbers}")


def with_notice_attachments(store: Store, clock: Clock, policy: AttachmentPolicy | None,
                            rows: Sequence[Mapping[str, Any]], *, key: str, data: bytes, message_id: str,
                            stages: Sequence[int], customer: Mapping[str, Any], business_date: date, company: str,
                            fallback_locale: str = DEFAULT_FALLBACK_LOCALE) -> bytes:
    """``data`` (the notice as built) with its files, as effect ``key`` (``notice:<id>``) will freeze it;
    ``data`` unchanged when the policy attaches nothing to these rows, or when an earlier attempt already froze
    the message (the ledger sends those bytes).

    Raises:
        AttachmentError: as :func:`notice_attachments`.
    """
    if policy is None or not notice_wants(policy, rows, stages):
        return data
    earlier = EffectLedger(store, clock=clock, source=current_source("worker")).get(key)
    if earlier is not None and earlier.get("frozen") is not None:
        return data
    return attach(data, notice_attachments(store, policy, rows, stages=stages, customer=customer,
                                           business_date=business_date, company=company,
                                           fallback_locale=fallback_locale), seed=message_id)
