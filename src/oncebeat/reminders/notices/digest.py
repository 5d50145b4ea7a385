"""The facts of a frozen message that outlive its bytes: SHA-256, size and header block.

The effect ledger drops a message's frozen bytes once it is delivered (``effects.sql``, ``effect_finish``); the
send job records these facts in the effect's result (with the Message-ID and the server's reply), so a proof of
notice (:mod:`.evidence`) can say which exact bytes went out long after them: anyone holding a copy (the
customer, the relay's archive, a BCC mailbox) proves it is that message with ``sha256sum``.

Example::

    message_facts(b"From: a@example.test\\r\\nSubject: Hi\\r\\n\\r\\nbody")
    # {"sha256": "…", "size": 41, "headers": [["From", "a@example.test"], ["Subject", "Hi"]]}
"""

from __future__ import annotations

import email.policy
import email.utils
import hashlib
import re
from email.parser import BytesHeaderParser
from typing import Any

from ...mail.compose import ComposedMessage

__all__ = ["composed_facts", "message_facts"]

# Every send records these facts, and the email package's header registry cost ~0.9 ms of CPU per message (a
# fifth of a reminder's worker CPU, issue 27). Most header values the registry would hand back unchanged: those
# are copied as they are; the rest (encoded words, non-ASCII, quoting, comments, an address list the registry
# re-renders) still go through the registry, one header at a time, so the result is the registry's exactly
# (tests/unit/test_message_facts.py compares both on generated messages).
_PLAIN = re.compile(r"[\x20-\x7e]*")  # printable ASCII (tabs and controls go to the registry)
_SPECIAL = re.compile(r'=\?|["()\\]')  # encoded words, quoted strings, comments, escapes
_ADDRESS_HEADERS = frozenset({"from", "to", "cc", "bcc", "reply-to", "sender", "resent-from", "resent-to",
                              "resent-cc", "resent-bcc", "resent-sender"})
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
# A mailbox as the registry renders it: a display name of atoms separated by one space, then <addr-spec>, or a
# bare addr-spec; several separated by ", ".
_MAILBOX = rf"(?:{_ATEXT}(?: {_ATEXT})* <{_ATEXT}(?:\.{_ATEXT})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*>" \
           rf"|{_ATEXT}(?:\.{_ATEXT})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)"
_MAILBOXES = re.compile(rf"{_MAILBOX}(?:, {_MAILBOX})*")
_DATE_HEADERS = frozenset({"date", "resent-date", "orig-date"})  # the registry re-renders a date
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"
# A MIME header of a type and parameters whose values are tokens or quoted tokens (a multipart boundary): the
# registry's parse tree prints such a value back as it was.
_MIME_PARAMS = re.compile(rf"{_TOKEN}(?:/{_TOKEN})?(?:; [A-Za-z0-9-]+=(?:{_TOKEN}|\"[A-Za-z0-9'()+_,./:=?-]*\"))*")
_MIME_HEADERS = frozenset({"content-type", "content-disposition"})


def message_facts(data: bytes) -> dict[str, Any]:
    """``{"sha256": hex digest of data, "size": bytes, "headers": [[name, value], …]}`` of message bytes ``data``.

    Header values are decoded (RFC 2047 words as text) in their order in the message, as the email package's
    ``email.policy.default`` reads them; a header the strict parser cannot read is kept as its raw text, never
    dropped (this is evidence, not a mail client).
    """
    headers = _headers_fast(data)
    if headers is None:
        headers = _headers_registry(data)
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "headers": headers}


def composed_facts(message: ComposedMessage) -> dict[str, Any]:
    """:func:`message_facts` of ``message.data``, the header values taken from what its builder knows
    (:class:`~oncebeat.mail.compose.ComposedMessage`) instead of parsed back: the same dict, ~20 µs instead of ~300 µs
    for a reminder with a non-ASCII name and subject (``tests/unit/test_compose.py`` compares both)."""
    if not message.fields:
        return message_facts(message.data)
    headers = [[name, known if known is not None else value if _plain(name.lower(), value)
                else _registry_value(name, value)] for name, value, known in message.fields]
    return {"sha256": hashlib.sha256(message.data).hexdigest(), "size": len(message.data), "headers": headers}


def _headers_registry(data: bytes) -> list[list[str]]:
    try:
        parsed = BytesHeaderParser(policy=email.policy.default).parsebytes(data)
        return [[name, str(value)] for name, value in parsed.items()]
    except Exception:  # a malformed header the strict registry refuses: the raw header block instead
        raw = BytesHeaderParser(policy=email.policy.compat32).parsebytes(data)
        return [[name, str(value)] for name, value in raw.items()]


def _headers_fast(data: bytes) -> list[list[str]] | None:
    """The header list as :func:`_headers_registry` gives it, or None when the block is not plain CRLF ASCII."""
    head, sep, _ = data.partition(b"\r\n\r\n")
    if not sep or b"\n\n" in head or b"\r\r" in head:
        return None
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        return None
    fields: list[list[str]] = []
    for line in text.split("\r\n"):
        if line[:1] in (" ", "\t"):
            if not fields:
                return None
            fields[-1][1] += line  # unfolded as the registry does: the line break goes, the blank stays
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or "\n" in line or "\r" in line:
            return None
        fields.append([name, value.lstrip(" \t")])
    out: list[list[str]] = []
    for name, value in fields:
        if _plain(name.lower(), value):
            out.append([name, value])
        else:
            out.append([name, _registry_value(name, value)])
    return out


def _plain(lname: str, value: str) -> bool:
    """Whether the registry hands ``value`` back unchanged for a header named ``lname`` (lower case)."""
    if not _PLAIN.fullmatch(value) or value != value.strip():
        return False
    if lname in _MIME_HEADERS:
        return _MIME_PARAMS.fullmatch(value) is not None and "=?" not in value
    if _SPECIAL.search(value):
        return False
    if lname in _ADDRESS_HEADERS:
        return _MAILBOXES.fullmatch(value) is not None
    if lname in _DATE_HEADERS:  # the registry prints the parsed instant: unchanged when already in that form
        try:
            return email.utils.format_datetime(email.utils.parsedate_to_datetime(value)) == value
        except (TypeError, ValueError):
            return False
    return True


def _registry_value(name: str, value: str) -> str:
    try:
        return str(email.policy.default.header_fetch_parse(name, value))
    except Exception:  # as _headers_registry: the raw text when the strict registry refuses it
        return value
