"""The checker's attachment invariant, judged from the Maildir (what customers received) and the policy.

``attachments-as-frozen``: every delivered reminder carries exactly what the ``[attachments]`` policy promises
its stage (a statement PDF where ``statement`` names the stage, the invoice PDF with ``invoice_pdf``; nothing
otherwise), each file a real PDF (``%PDF-``), and the files' bytes are those frozen at the reminder's first
attempt: their SHA-256 equal the recorded ones (:func:`oncebeat.reminders.notices.sending.attachment_digests`,
written from the effect's frozen message), and every copy of one Message-ID carries the same files. A retry
or a take-over after a crash that regenerated the statement instead of sending the frozen bytes fails it.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import mailbox
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..reminders.notices.attachments import AttachmentPolicy

__all__ = ["ATTACHMENT_INVARIANTS", "check_attachments"]

ATTACHMENT_INVARIANTS = ("attachments-as-frozen",)


class Invariant(Protocol):
    checked: int

    def fail(self, example: str) -> None: ...


def check_attachments(inv: Invariant, *, maildir: Path | None, policy: AttachmentPolicy | None,
                      stages: Sequence[int], recorded: dict[int, list[str]]) -> None:
    """Judge ``attachments-as-frozen`` (see the module docstring) on every message in ``maildir``."""
    if maildir is None or policy is None or not maildir.exists():
        return
    by_message_id: dict[str, list[str]] = {}
    for raw in mailbox.Maildir(maildir, factory=None):
        msg = email.message_from_bytes(raw.as_bytes(), policy=email.policy.default)
        reminder, stage = msg.get("X-Oncebeat-Reminder"), msg.get("X-Oncebeat-Stage")
        if reminder is None or stage is None:
            continue
        inv.checked += 1
        where = f"{msg.get('X-Oncebeat-Invoice')} stage {stage} ({msg.get('Message-ID')})"
        files = [(p.get_filename() or "", p.get_content()) for p in msg.iter_attachments()]
        digests = [hashlib.sha256(data).hexdigest() for _, data in files]
        promised = int(policy.invoice_pdf) + int(policy.wants_statement(int(stage), stages))
        if len(files) != promised:
            inv.fail(f"{where} carries {len(files)} file(s); the policy promises {promised}")
        if policy.wants_statement(int(stage), stages) and not any(n.startswith("statement-") for n, _ in files):
            inv.fail(f"{where} was delivered without the statement its stage promises")
        if not all(data.startswith(b"%PDF-") for _, data in files):
            inv.fail(f"{where} carries a file that is not a PDF")
        if promised and digests != recorded.get(int(reminder), []):
            inv.fail(f"{where}: the delivered files differ from those frozen at the first attempt")
        earlier = by_message_id.setdefault(str(msg.get("Message-ID")), digests)
        if earlier != digests:
            inv.fail(f"{where}: two copies of one Message-ID carry different files")
