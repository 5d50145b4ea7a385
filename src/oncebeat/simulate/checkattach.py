"""The checker's attachment invariant, judged from the Maildir (what customers received) and the policy.

``attachments-as-frozen``: every delivered reminder carries exactly what the ``[attachments]`` policy promises
its stage (a statement PDF where ``statement`` names the stage, the invoice PDF with ``invoice_pdf``; nothing
otherwise), each file a real PDF (``%PDF-``), and the files' bytes are those frozen at the reminder's first
attempt: their SHA-256 equal the recorded ones (:func:`oncebeat.reminders.notices.sending.attachment_digests`,
written from the effect's frozen message), and every copy of one Message-ID carries the same files. A retry
or a take-over after a crash that regenerated the statement instead of sending the frozen bytes fails it.
A grouped notice (``X-Oncebeat-Notice``, :mod:`oncebeat.reminders.notices.grouped_files`) carries the PDF of each
invoice it lists and ONE statement when any listed stage wants one; its rows each recorded the notice's files.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import mailbox
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ..reminders.notices.attachments import AttachmentPolicy

__all__ = ["ATTACHMENT_INVARIANTS", "check_attachments"]

ATTACHMENT_INVARIANTS = ("attachments-as-frozen",)


class Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


def check_attachments(inv: Invariant, *, maildir: Path | None, policy: AttachmentPolicy | None,
                      stages: Sequence[int], recorded: dict[int, list[str]],
                      notice_rows: Mapping[int, Sequence[tuple[int, str, int]]] | None = None,
                      stages_of: Callable[[int], Sequence[int]] | None = None) -> None:
    """Judge ``attachments-as-frozen`` (see the module docstring) on every message in ``maildir``;
    ``notice_rows``: notice id -> the (reminder id, invoice number, stage) of each row it lists; ``stages_of``:
    reminder id -> the stages of the ladder version it was created under (its "final" stage; default
    ``stages``, the policy file's)."""
    def ladder(reminder_id: int) -> Sequence[int]:
        return stages_of(reminder_id) if stages_of is not None else stages

    if maildir is None or policy is None or not maildir.exists():
        return
    by_message_id: dict[str, list[str]] = {}
    for raw in mailbox.Maildir(maildir, factory=None):
        msg = email.message_from_bytes(raw.as_bytes(), policy=email.policy.default)
        reminder, stage = msg.get("X-Oncebeat-Reminder"), msg.get("X-Oncebeat-Stage")
        notice = str(msg.get("X-Oncebeat-Notice") or "").strip()
        if reminder is not None and stage is not None:
            where = f"{msg.get('X-Oncebeat-Invoice')} stage {stage} ({msg.get('Message-ID')})"
            invoices, statement = 1, policy.wants_statement(int(stage), ladder(int(reminder)))
        elif notice.isdigit() and notice_rows is not None and notice_rows.get(int(notice)):
            rows = notice_rows[int(notice)]
            reminder = str(rows[0][0])
            where = f"notice {notice} of {', '.join(n for _, n, _ in rows)} ({msg.get('Message-ID')})"
            invoices = len({n for _, n, _ in rows})
            statement = any(policy.wants_statement(s, ladder(rid)) for rid, _, s in rows)
        else:
            continue
        inv.checked += 1
        files = [(p.get_filename() or "", p.get_content()) for p in msg.iter_attachments()]
        digests = [hashlib.sha256(data).hexdigest() for _, data in files]
        promised = int(policy.invoice_pdf) * invoices + int(statement)
        if len(files) != promised:
            inv.fail(f"{where} carries {len(files)} file(s); the policy promises {promised}")
        if statement and sum(n.startswith("statement-") for n, _ in files) != 1:
            inv.fail(f"{where} was delivered without the one statement its stage promises")
        if not all(data.startswith(b"%PDF-") for _, data in files):
            inv.fail(f"{where} carries a file that is not a PDF")
        if promised and digests != recorded.get(int(reminder), []):
            inv.fail(f"{where}: the delivered files differ from those frozen at the first attempt")
        earlier = by_message_id.setdefault(str(msg.get("Message-ID")), digests)
        if earlier != digests:
            inv.fail(f"{where}: two copies of one Message-ID carry different files")
