"""A built message with the facts its builder knows: bytes, envelope and the header block as a reader decodes it.

A send records the SHA-256, size and decoded header list of the bytes it sent (the proof of notice,
``reminders.notices.digest``). Reading those headers back from the bytes (the email package's header registry)
cost ~0.3 ms of CPU per reminder; the builder that wrote them already knows most of the decoded values:

* a mailbox whose display name it wrote as one RFC 2047 encoded-word decodes to that ``Address``, which the registry
  prints as ``str(Address)`` (quoting a name with specials);
* a subject or extra header it wrote as encoded-words decodes to the sanitised text itself;
* the ``Date`` it wrote is in the form the registry prints back.

Every other header (plain ASCII text and mailboxes, whose reading depends on quoting and comments) is handed over
with ``None`` as its decoded value: the reader of the facts decides it from the raw value, as it would from the
bytes. ``tests/unit/test_compose.py`` compares the two readings on generated messages.

Example::

    m = compose_message(sender="Billing <billing@example.com>", to="Zoë Müller <zoe@example.com>",
                        subject="Rechnung 7 ist überfällig", text="…", html=None,
                        message_id=make_message_id("reminder:7:1", "example.com"))
    m.data        # b"From: Billing <billing@example.com>\\r\\nTo: =?utf-8?b?…?= <zoe@example.com>\\r\\n…"
    m.envelope    # Envelope(sender="billing@example.com", recipients=("zoe@example.com",), utf8=False)
    m.fields      # (("From", "Billing <billing@example.com>", None), ("To", "=?utf-8?b?…?= <…>", "Zoë Müller <…>"), …)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address

from .message import _WORD_BYTES, Envelope, _bytes_of, _prepare, _Prepared, envelope_of, parse_address

__all__ = ["ComposedMessage", "compose_message"]

_DOT_ATOM = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
_HOST = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*")


@dataclass(frozen=True, slots=True)
class ComposedMessage:
    """One built message and what its builder knows about it.

    Attributes:
        data: the RFC 5322 bytes (CRLF, ``Bcc`` never present), as :func:`~oncebeat.mail.build_message_bytes`.
        envelope: the SMTP envelope (``cc`` and ``bcc`` included), as :func:`~oncebeat.mail.
            build_message_envelope`.
        fields: the top-level header block in order, ``(name, raw unfolded value, decoded value or None)``; None:
            the builder does not vouch for the decoded value (decide it from the raw one). Empty when the message
            was built by the email package (a non-ASCII local part: SMTPUTF8): read the bytes instead.
    """

    data: bytes
    envelope: Envelope
    fields: tuple[tuple[str, str, str | None], ...]


def compose_message(*, sender: str | Address, to: str | Address, subject: str, text: str, html: str | None,
                    message_id: str, reply_to: str | Address | None = None, headers: Mapping[str, str] | None = None,
                    date: datetime | None = None, cc: Sequence[str | Address] = (),
                    bcc: Sequence[str | Address] = ()) -> ComposedMessage:
    """:func:`~oncebeat.mail.build_message_envelope` (same arguments, checks and bytes) with the header facts.

    Raises:
        ValueError: as :func:`~oncebeat.mail.build_message`.
    """
    p = _prepare(sender=sender, to=to, subject=subject, message_id=message_id, reply_to=reply_to, headers=headers,
                 date=date, cc=cc)
    hidden = tuple(parse_address(a, field=f"bcc[{n}]", deliverable=True) for n, a in enumerate(bcc))
    raw: list[tuple[str, str]] = []
    data = _bytes_of(p, text=text, html=html, args=dict(sender=sender, to=to, subject=subject, text=text, html=html,
                                                        message_id=message_id, reply_to=reply_to, headers=headers,
                                                        date=date, cc=cc), fields=raw)
    known = _known(p)[:len(raw)]
    known += [None] * (len(raw) - len(known))
    return ComposedMessage(data=data, envelope=envelope_of(p.sender, (p.to, *p.cc, *hidden)),
                           fields=tuple((name, value, k) for (name, value), k in zip(raw, known, strict=True)))


def _known(p: _Prepared) -> list[str | None]:
    """The decoded values the builder vouches for, in the order :func:`_bytes_of` writes the headers (From, To,
    Cc, Reply-To, Subject, Date, Message-ID, the extra headers); the MIME headers after them: None."""
    out = [_mailboxes((p.sender,)), _mailboxes((p.to,))]
    if p.cc:
        out.append(_mailboxes(p.cc))
    if p.reply_to is not None:
        out.append(_mailboxes((p.reply_to,)))
    out += [_text(p.subject), p.date, None]
    out += [_text(value) for _, value in p.extra]
    return out


def _mailboxes(addrs: Sequence[Address]) -> str | None:
    """The registry's reading of mailboxes the builder wrote with encoded-word display names: ``str(Address)``
    joined by ", "; None when any mailbox has a plain ASCII display name (quoting decides its reading), a name of
    more than one encoded-word or with a tab or two blanks in a row (the registry inserts or folds blanks there),
    or an address outside dot-atom@host."""
    for a in addrs:
        name = a.display_name
        if name.isascii() or not _encodable(name) or len(name.encode("utf-8")) > _WORD_BYTES \
                or "\t" in name or "  " in name:
            return None  # the registry reads a phrase of several encoded-words or with runs of blanks its own way
        if _DOT_ATOM.fullmatch(a.username) is None or _HOST.fullmatch(a.domain) is None:
            return None
    return ", ".join(str(a) for a in addrs)


def _text(value: str) -> str | None:
    """An unstructured value written as encoded-words decodes to itself; an ASCII one is read from its raw text."""
    return None if value.isascii() or not _encodable(value) else value


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: written with surrogatepass, read back otherwise
        return False
    return True
