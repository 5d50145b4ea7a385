"""The facts of a frozen message that outlive its bytes: SHA-256, size and header block.

The effect ledger drops a message's frozen bytes once it is delivered (``effects.sql``, ``effect_finish``); the
send job records these facts in the effect's result (with the Message-ID and the server's reply), so a proof of
notice (:mod:`.evidence`) can say which exact bytes went out long after them: anyone holding a copy (the
customer, the relay's archive, a BCC mailbox) proves it is that message with ``sha256sum``.

Example::

    message_facts(b"From: a@example.test\\r\\nSubject: Hi\\r\\n\\r\\nbody")
    # {"sha256": "…", "size": 43, "headers": [["From", "a@example.test"], ["Subject", "Hi"]]}
"""

from __future__ import annotations

import email.policy
import hashlib
from email.parser import BytesHeaderParser
from typing import Any

__all__ = ["message_facts"]


def message_facts(data: bytes) -> dict[str, Any]:
    """``{"sha256": hex digest of data, "size": bytes, "headers": [[name, value], …]}`` of message bytes ``data``.

    Header values are decoded (RFC 2047 words as text) in their order in the message; a header the strict
    parser cannot read is kept as its raw text, never dropped (this is evidence, not a mail client).
    """
    try:
        parsed = BytesHeaderParser(policy=email.policy.default).parsebytes(data)
        headers = [[name, str(value)] for name, value in parsed.items()]
    except Exception:  # a malformed header the strict registry refuses: the raw header block instead
        raw = BytesHeaderParser(policy=email.policy.compat32).parsebytes(data)
        headers = [[name, str(value)] for name, value in raw.items()]
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "headers": headers}
