"""What goes on the wire for one message: its SMTP envelope (sender, recipients, SMTPUTF8 or not) and its DATA
payload (CRLF lines, ``Bcc`` removed, dots stuffed), from a message object or from frozen bytes."""

from __future__ import annotations

import copy
import email.utils
import io
import re
from email import policy as email_policy
from email.generator import BytesGenerator
from email.headerregistry import Address
from email.message import Message
from email.parser import HeaderParser
from email.policy import EmailPolicy

from oncebeat.errors import (
    MailError,
    PermanentMailError,
)

from .message import Envelope, envelope_address

__all__ = ["envelope_of_bytes", "message_bytes"]


def _mail_error(
    cls: type[MailError], message: str, *, code: int | None, reply: str, stage: str
) -> MailError:
    """Create ``cls(message)`` carrying ``.code``, ``.reply`` and ``.stage``."""
    exc = cls(message)
    exc.code = code  # type: ignore[attr-defined]
    exc.reply = reply  # type: ignore[attr-defined]
    exc.stage = stage  # type: ignore[attr-defined]
    return exc


def _reply_text(resp: bytes | str) -> str:
    text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else str(resp)
    return " ".join(text.split())


def _header_addresses(msg: Message, name: str) -> list[Address]:
    out: list[Address] = []
    for value in msg.get_all(name, []):
        addresses = getattr(value, "addresses", None)
        if addresses is not None:
            out.extend(a for a in addresses if a.username)
            continue
        for _, spec in email.utils.getaddresses([str(value)]):
            local, at, domain = spec.rpartition("@")
            if at and local and domain:
                out.append(Address(username=local, domain=domain))
    return out


def _envelope(msg: Message) -> Envelope:
    senders = _header_addresses(msg, "Sender") or _header_addresses(msg, "From")
    if not senders:
        raise _mail_error(
            PermanentMailError, "message has no From (or Sender) address", code=None, reply="", stage="envelope"
        )
    recipients: list[str] = []
    for name in ("To", "Cc", "Bcc"):
        for addr in _header_addresses(msg, name):
            spec = envelope_address(addr)
            if spec not in recipients:
                recipients.append(spec)
    if not recipients:
        raise _mail_error(
            PermanentMailError, "message has no To/Cc/Bcc recipient", code=None, reply="", stage="envelope"
        )
    sender = envelope_address(senders[0])
    utf8 = not all(s.isascii() for s in (sender, *recipients))
    return Envelope(sender=sender, recipients=tuple(recipients), utf8=utf8)


def _serialize(msg: Message, *, utf8: bool) -> bytes:
    """The message as SMTP DATA payload: CRLF lines, Bcc removed, dots not yet stuffed."""
    clean = copy.copy(msg)
    del clean["Bcc"]
    del clean["Resent-Bcc"]
    policy = msg.policy
    if isinstance(policy, EmailPolicy):
        policy = policy.clone(linesep="\r\n", utf8=utf8)
    else:
        policy = policy.clone(linesep="\r\n")
    buf = io.BytesIO()
    BytesGenerator(buf, mangle_from_=False, policy=policy).flatten(clean, linesep="\r\n")
    data = re.sub(rb"\r\n|\n|\r", b"\r\n", buf.getvalue())
    return data


def _dot_stuff(payload: bytes) -> bytes:
    """The content as sent inside DATA: leading dots doubled, ending in CRLF (the final ``.`` not included)."""
    data = re.sub(rb"(?m)^\.", b"..", payload)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data


def message_bytes(msg: Message) -> bytes:
    """``msg`` exactly as :meth:`Mailer.send` would transmit it (CRLF lines, ``Bcc`` removed).

    Freeze these bytes with an effect at its first attempt and pass them to :meth:`Mailer.send` on every
    attempt: a retry or an approved resend is then byte for byte the same message.

    Raises:
        PermanentMailError: the message has no sender or no recipient.
    """
    return _serialize(msg, utf8=_envelope(msg).utf8)


def envelope_of_bytes(data: bytes) -> Envelope:
    """The envelope (sender, recipients, SMTPUTF8 or not) of a serialised message, read from its header block only.

    The body is not parsed (``HeaderParser`` on the header block): reading the envelope of frozen bytes used to parse
    the whole MIME tree again, the largest CPU cost of a send. Addresses still go through the email
    package's strict header registry (``policy.default``).

    Raises:
        PermanentMailError: the message has no sender or no recipient.
    """
    # Header text is UTF-8 (RFC 6532) in an SMTPUTF8 message: decoded as such, not as ASCII with surrogate
    # escapes (which gave RCPT TO:<j\udcc3\udcbcrgen@…> for jürgen@…).
    head = data.split(b"\r\n\r\n", 1)[0].decode("utf-8", "surrogateescape")
    return _envelope(HeaderParser(policy=email_policy.default).parsestr(head))


