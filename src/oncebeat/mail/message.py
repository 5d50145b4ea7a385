"""Building RFC 5322 reminder messages that are safe to hand to any SMTP server.

Everything here is pure (no network, no wall clock unless ``date`` is omitted)
and uses only the stdlib :mod:`email` package with :data:`email.policy.SMTP`
(CRLF line endings, RFC 2047 encoded words for non-ASCII header text).

What is supported, precisely:

* **Display names** may contain any Unicode text, quotes, commas, colons and
  ``@``; they are encoded (RFC 2047) when the message is serialised for a
  server without SMTPUTF8, and never parsed as addresses.
* **Header injection is impossible**: CR, LF and every other character Python
  treats as a line break (``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``,
  U+2028, U+2029) and the remaining C0 control characters are replaced by a
  single space in display names, subjects and extra header values *before*
  they are set. The email package would raise ``ValueError`` on raw newlines;
  we never let it get that far, so a hostile customer name cannot crash a send.
* **RFC 2047 encoded-words are neutralised** in the same values: every ``=?``
  becomes ``= ?``. Python 3.11.0-3.11.9 and 3.12.0-3.12.4 decode an
  encoded-word such as ``=?utf-8?b?Qm9iDQpSZXBseS1Ubzog...?=`` (``Bob\\r\\nReply-To:
  ...``) while re-parsing a header and then write the decoded CR/LF verbatim,
  creating a real header (CVE-2024-6923); broken up, the text is no
  encoded-word for any parser and shows up as typed. A local part holding
  ``=?`` or a control character is refused (``ValueError``), since the same
  decoder runs on it.
* **Non-ASCII domains** (``zoe@bücher.example``) are converted to their ASCII
  IDNA form (``xn--bcher-kva.example``, IDNA 2003 via the stdlib codec) in the
  headers, so they work with every server.
* **Non-ASCII local parts** (``jürgen@example.com``) are accepted and kept as
  UTF-8; such a message can only be sent to a server that offers SMTPUTF8
  (RFC 6531). :class:`oncebeat.mail.smtp.Mailer` checks this and raises
  :class:`~oncebeat.errors.PermanentMailError` otherwise.
* The body is ``text/plain`` or ``multipart/alternative`` (text + HTML), UTF-8,
  quoted-printable when non-ASCII, so it is 7-bit clean for any server.

Example::

    msg = build_message(
        sender='"Billing" <billing@example.com>',
        to='"Zoë Müller" <zoe@example.com>',
        subject="Invoice INV-7 is overdue",
        text="Hello Zoë, ...",
        html="<p>Hello Zoë, ...</p>",
        message_id=make_message_id("reminder:INV-7:1", "example.com"),
    )
"""

from __future__ import annotations

import binascii
import email.policy
import email.utils
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from functools import lru_cache
from typing import Any

from oncebeat.textsafe import strip_format_characters
from oncebeat.timebase import SystemClock, require_aware

__all__ = [
    "Envelope",
    "build_message",
    "build_message_bytes",
    "build_message_envelope",
    "envelope_address",
    "envelope_of",
    "make_message_id",
    "parse_address",
    "address_problem",
    "sanitize_header_text",
    "idna_domain",
    "RESERVED_HEADERS",
]

# Every character str.splitlines() splits on, plus the other C0 controls
# (except TAB) and DEL: none of them belongs in a header value.
_UNSAFE_HEADER_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]+")
# The start of an RFC 2047 encoded-word; see the module docstring (CVE-2024-6923).
_ENCODED_WORD_START = re.compile(r"=(?=\?)")

#: Headers :func:`build_message` sets itself; ``headers=`` may not override them.
RESERVED_HEADERS = frozenset(
    name.lower()
    for name in (
        "From",
        "Sender",
        "To",
        "Cc",
        "Bcc",
        "Reply-To",
        "Subject",
        "Date",
        "Message-ID",
        "MIME-Version",
        "Content-Type",
        "Content-Transfer-Encoding",
        "Content-Disposition",
        "Return-Path",
        "Received",
        "Resent-From",
        "Resent-To",
        "Resent-Cc",
        "Resent-Bcc",
        "Resent-Date",
        "Resent-Message-ID",
        "Resent-Sender",
    )
)

# RFC 5322 field name: printable US-ASCII except colon.
_HEADER_NAME = re.compile(r"^[!-9;-~]+$")
# Dot-atom local part; non-ASCII allowed (RFC 6531 UTF8-non-ascii).
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\u0080-\U0010ffff-]+"
_LOCAL_PART = re.compile(rf"^{_ATOM}(?:\.{_ATOM})*$")
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_ASCII_DOMAIN = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_DOMAIN_LITERAL = re.compile(r"^\[[A-Za-z0-9:.]+\]$")
_MESSAGE_ID = re.compile(r"^<[!-;=?-~]+@[!-;=?-Z^-~]+>$")  # printable ASCII, no '<', '>' inside; no brackets in domain
_SLUG_JUNK = re.compile(r"[^a-z0-9]+")


def sanitize_header_text(value: str) -> str:
    """Make ``value`` safe as a single-line header value.

    Runs of line-break and control characters (CR, LF, ``\\v``, ``\\f``, NUL,
    U+2028, ...) become one space; every ``=?`` (the start of an RFC 2047
    encoded-word, which vulnerable interpreters decode into raw CR/LF) becomes
    ``= ?``; invisible format characters (bidirectional overrides such as
    U+202E, zero-width spaces; :mod:`oncebeat.textsafe`) are removed, the
    joiners U+200C/U+200D kept; surrounding whitespace is stripped. Other
    text, including any non-ASCII, is kept.

    Args:
        value: Arbitrary text, e.g. a customer name or a subject.

    Returns:
        str: The sanitised single-line text.
    """
    return _ENCODED_WORD_START.sub("= ", _UNSAFE_HEADER_CHARS.sub(" ", strip_format_characters(value))).strip()


def address_problem(addr_spec: str) -> str | None:
    """Why ``addr_spec`` can never be delivered to, or ``None``: the one rule for imports and sends.

    Syntax only (no DNS): ``email-validator`` with deliverability checks off and quoted local parts,
    domain literals and special-use domains refused, except ``.test`` (RFC 6761), which development and
    test data use with a local sink. On top, a local part holding ``=?`` (an RFC 2047 encoded-word)
    or a control character is refused (see the module docstring, CVE-2024-6923). Refused, for example:
    ``"a,b"@example.test``, ``bob@-example-.test``, ``bob@exa_mple.test``, a local part over 64
    characters, an address over 254.

    Args:
        addr_spec: A bare address such as ``zoe@example.com`` (no display name).

    Returns:
        str | None: A short reason (``"the part after the @-sign contains invalid characters: '_'"``),
        or ``None`` when the address is fine.
    """
    return _address_problem(addr_spec)


@lru_cache(maxsize=4096)  # a pure function of the text; a send checks its recipient twice (service, builder)
def _address_problem(addr_spec: str) -> str | None:
    local = addr_spec.rpartition("@")[0]
    if "=?" in local or _UNSAFE_HEADER_CHARS.search(addr_spec):
        return "its local part holds an RFC 2047 encoded-word ('=?') or a control character"
    from email_validator import EmailNotValidError, validate_email  # here: 0.1 s to import, and few processes check

    try:
        validate_email(addr_spec, check_deliverability=False, test_environment=True, allow_quoted_local=False,
                       allow_domain_literal=False)
    except EmailNotValidError as exc:
        reason = str(exc).rstrip(".")
        return reason[:1].lower() + reason[1:]
    return None


def idna_domain(domain: str) -> str:
    """Return the ASCII (IDNA 2003) form of a mail domain.

    Args:
        domain: A host name such as ``"bücher.example"`` or an address literal
            such as ``"[192.0.2.1]"``.

    Returns:
        str: ``"xn--bcher-kva.example"``; ASCII domains are returned unchanged,
        address literals are returned as given.

    Raises:
        ValueError: The domain is empty, has an empty or over-long label, or
            contains characters not allowed in a host name.
    """
    domain = domain.strip()
    if _DOMAIN_LITERAL.match(domain):
        return domain
    if not domain:
        raise ValueError("empty mail domain")
    try:
        ascii_domain = domain.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"invalid mail domain {domain!r}: {exc}") from None
    if not _ASCII_DOMAIN.match(ascii_domain.rstrip(".")):
        raise ValueError(f"invalid mail domain {domain!r}")
    return ascii_domain.rstrip(".")


def parse_address(value: str | Address, *, field: str = "address", deliverable: bool = False) -> Address:
    """Parse one mailbox strictly and return a header-safe :class:`Address`.

    Accepted forms: ``zoe@example.com``, ``Zoë Müller <zoe@example.com>`` and
    ``"Zoë Müller" <zoe@example.com>``, or an :class:`Address` instance. The
    address is taken from the *last* ``<...>`` only, so a display name can
    never smuggle in another recipient (``Eve Bcc: evil@example.com
    <eve@example.com>`` is the single mailbox ``eve@example.com`` with the
    display name ``Eve Bcc: evil@example.com``). Line breaks and control
    characters in the display name are replaced by spaces. The domain is
    converted to IDNA ASCII form; a non-ASCII local part is kept (it needs
    SMTPUTF8 to be sent).

    Args:
        value: The mailbox text or an :class:`email.headerregistry.Address`.
        field: Name used in error messages (e.g. ``"to"``).
        deliverable: Also apply :func:`address_problem` (recipients: the same rule the import applied).

    Returns:
        Address: The parsed mailbox.

    Raises:
        ValueError: ``value`` is not exactly one valid mailbox.
    """
    if isinstance(value, Address):
        name, addr_spec = value.display_name, f"{value.username}@{value.domain}"
    else:
        text = sanitize_header_text(value)
        lt = text.rfind("<")
        if text.endswith(">") and lt != -1:
            addr_spec = text[lt + 1 : -1].strip()
            name = text[:lt].strip()
            if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
                name = email.utils.unquote(name)
        elif "<" in text or ">" in text:
            raise ValueError(f"{field}: cannot parse mailbox {value!r}; use 'Name <user@domain>' or 'user@domain'")
        else:
            name, addr_spec = "", text
    return _parse_mailbox(sanitize_header_text(name), addr_spec, field, deliverable)


@lru_cache(maxsize=4096)  # pure; Address is immutable: the policy's sender and reply-to are parsed once
def _parse_mailbox(name: str, addr_spec: str, field: str, deliverable: bool) -> Address:
    local, at, domain = addr_spec.rpartition("@")
    if not at or not local or not domain:
        raise ValueError(f"{field}: {addr_spec!r} is not an email address (expected user@domain)")
    if "=?" in local or _UNSAFE_HEADER_CHARS.search(local):
        raise ValueError(f"{field}: {addr_spec!r} is not a deliverable email address: its local part holds an "
                         "RFC 2047 encoded-word ('=?') or a control character")
    problem = address_problem(addr_spec) if deliverable else None
    if problem is not None:
        raise ValueError(f"{field}: {addr_spec!r} is not a deliverable email address: {problem}")
    try:
        domain = idna_domain(domain)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None
    if local.isascii():
        try:
            parsed = Address(addr_spec=f"{local}@{domain}")
        except Exception as exc:  # the header parser raises several types
            raise ValueError(f"{field}: {addr_spec!r} is not a valid email address ({exc})") from None
        return Address(display_name=name, username=parsed.username, domain=parsed.domain)
    if not _LOCAL_PART.match(local):
        raise ValueError(f"{field}: {addr_spec!r} is not a valid email address")
    return Address(display_name=name, username=local, domain=domain)


def make_message_id(key: str, domain: str) -> str:
    """Return a deterministic ``Message-ID`` for an effect key.

    The same ``(key, domain)`` always gives the same id, so a resend of an
    in-doubt message is recognisable downstream. Shape:
    ``<{slug}.{sha256(key)[:24]}@{domain}>`` where ``slug`` is a readable,
    lower-case, at most 40-character version of the key (``[a-z0-9-]``)
    and the hash keeps distinct keys distinct.

    Args:
        key: The effect key, e.g. ``"reminder:INV-2024-07:stage-1"``; non-empty.
        domain: The sender's domain, e.g. ``"example.com"`` (IDNA-encoded if
            non-ASCII).

    Returns:
        str: E.g. ``"<reminder-inv-2024-07-stage-1.5c1f...@example.com>"``.

    Raises:
        ValueError: ``key`` is empty or ``domain`` is not a valid host name.
    """
    if not key:
        raise ValueError("make_message_id: key must not be empty")
    ascii_domain = idna_domain(domain)
    if ascii_domain.startswith("["):
        raise ValueError(f"make_message_id: domain must be a host name, not an address literal ({domain!r})")
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    slug = _SLUG_JUNK.sub("-", key.lower()).strip("-")[:40].strip("-")
    left = f"{slug}.{digest}" if slug else digest
    return f"<{left}@{ascii_domain}>"


def _check_message_id(message_id: str) -> str:
    message_id = message_id.strip()
    if not _MESSAGE_ID.match(message_id) or "=?" in message_id:
        raise ValueError(
            f"message_id {message_id!r} is not of the form <left@domain> (printable ASCII, no spaces); "
            "use make_message_id()"
        )
    return message_id


@dataclass(frozen=True, slots=True)
class _Prepared:
    """The validated, sanitised header values of one message (shared by both builders)."""

    sender: Address
    to: Address
    reply_to: Address | None
    cc: tuple[Address, ...]
    subject: str
    date: str
    message_id: str
    extra: list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Envelope:
    """The SMTP envelope of one message.

    Attributes:
        sender: the ``MAIL FROM`` address (``local@domain``, domain in IDNA form).
        recipients: the ``RCPT TO`` addresses, in order, without repeats.
        utf8: an address is not ASCII: the message needs SMTPUTF8 (RFC 6531).
    """

    sender: str
    recipients: tuple[str, ...]
    utf8: bool


def envelope_address(addr: Address) -> str:
    """``local@domain`` for MAIL/RCPT with the domain in IDNA form."""
    return _envelope_spec(addr.username, addr.domain)


@lru_cache(maxsize=1024)
def _envelope_spec(username: str, domain: str) -> str:
    try:
        ascii_domain = idna_domain(domain)
    except ValueError:
        ascii_domain = domain
    return Address(username=username, domain=ascii_domain).addr_spec


def envelope_of(sender: Address, recipients: Sequence[Address]) -> Envelope:
    """The envelope of a message from ``sender`` to ``recipients`` (repeats dropped, order kept)."""
    specs: list[str] = []
    for addr in recipients:
        spec = envelope_address(addr)
        if spec not in specs:
            specs.append(spec)
    first = envelope_address(sender)
    return Envelope(sender=first, recipients=tuple(specs), utf8=not all(s.isascii() for s in (first, *specs)))


def _prepare(*, sender: str | Address, to: str | Address, subject: str, message_id: str,
             reply_to: str | Address | None, headers: Mapping[str, str] | None, date: datetime | None,
             cc: Sequence[str | Address] = ()) -> _Prepared:
    from_addr = parse_address(sender, field="sender")
    to_addr = parse_address(to, field="to", deliverable=True)
    cc_addrs = tuple(parse_address(a, field=f"cc[{n}]", deliverable=True) for n, a in enumerate(cc))
    when = require_aware(date, "date") if date is not None else SystemClock().now()
    extra: list[tuple[str, str]] = []
    for name, value in (headers or {}).items():
        if not _HEADER_NAME.match(name):
            raise ValueError(f"headers: {name!r} is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"headers: {name!r} is set by build_message and cannot be overridden")
        extra.append((name, sanitize_header_text(str(value))))
    return _Prepared(sender=from_addr, to=to_addr, cc=cc_addrs,
                     reply_to=parse_address(reply_to, field="reply_to") if reply_to is not None else None,
                     subject=sanitize_header_text(subject), date=email.utils.format_datetime(when),
                     message_id=_check_message_id(message_id), extra=extra)


def build_message(
    *,
    sender: str | Address,
    to: str | Address,
    subject: str,
    text: str,
    html: str | None,
    message_id: str,
    reply_to: str | Address | None = None,
    headers: Mapping[str, str] | None = None,
    date: datetime | None = None,
    cc: Sequence[str | Address] = (),
) -> EmailMessage:
    """Build a reminder email: ``text/plain``, or text + HTML as ``multipart/alternative``.

    Args:
        sender: The ``From`` mailbox, e.g. ``'"Billing" <billing@example.com>'``.
        to: The single recipient mailbox, e.g. ``'"Zoë Müller" <zoe@example.com>'``; its address must pass
            :func:`address_problem` (the rule imports apply).
        subject: The subject; line breaks/control characters become spaces.
        text: The plain-text body (always present).
        html: The HTML alternative, or ``None`` for a text-only message.
        message_id: The ``Message-ID`` including angle brackets, normally from
            :func:`make_message_id`.
        reply_to: Optional ``Reply-To`` mailbox.
        headers: Extra headers such as ``{"X-Oncebeat-Effect": key}``. Names
            must be RFC 5322 field names and not one of
            :data:`RESERVED_HEADERS`; values are sanitised like the subject.
        date: The ``Date`` header, timezone-aware; defaults to now (UTC) from
            :class:`oncebeat.timebase.SystemClock`.
        cc: ``Cc`` mailboxes (each must pass :func:`address_problem`), in order; none: no ``Cc`` header.

    Returns:
        EmailMessage: A message with ``policy=email.policy.SMTP`` (CRLF).
        Serialise it with ``msg.as_bytes()``; if the recipient's local part is
        non-ASCII use ``policy=email.policy.SMTPUTF8`` (the :class:`Mailer`
        does this for you).

    Raises:
        ValueError: An address or the message id is invalid, a header name is
            invalid or reserved, or ``date`` is naive.
    """
    p = _prepare(sender=sender, to=to, subject=subject, message_id=message_id, reply_to=reply_to, headers=headers,
                 date=date, cc=cc)
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = p.sender
    msg["To"] = p.to
    if p.cc:
        msg["Cc"] = p.cc
    if p.reply_to is not None:
        msg["Reply-To"] = p.reply_to
    msg["Subject"] = p.subject
    msg["Date"] = p.date
    msg["Message-ID"] = p.message_id
    for name, value in p.extra:
        msg[name] = value
    msg.set_content(text, subtype="plain", cte=_cte(text))
    if html is not None:
        msg.add_alternative(html, subtype="html", cte=_cte(html))
        for part in msg.iter_parts():  # the email package repeats it in the new part
            del part["MIME-Version"]
    return msg


def build_message_bytes(
    *,
    sender: str | Address,
    to: str | Address,
    subject: str,
    text: str,
    html: str | None,
    message_id: str,
    reply_to: str | Address | None = None,
    headers: Mapping[str, str] | None = None,
    date: datetime | None = None,
) -> bytes:
    """The message :func:`build_message` builds, as the bytes :func:`~oncebeat.mail.message_bytes` would send.

    Same arguments, validation and header defences as :func:`build_message` (the values go through
    the same :func:`parse_address` / :func:`sanitize_header_text`), but the RFC 5322 text is
    assembled directly instead of through :class:`~email.message.EmailMessage`, whose header
    registry parses and re-folds every header twice (about 1 ms of CPU per reminder against
    ~0.1 ms here). The result parses to the same headers and bodies; it differs only in layout:
    non-ASCII header text is sent as whole ``=?utf-8?b?…?=`` encoded-words (at most 75
    characters each, RFC 2047 §2), lines are folded at spaces before 78 characters, and the
    MIME boundary is derived from the Message-ID (``=_oncebeat_…``; ``=_`` cannot occur in
    quoted-printable text). CRLF line endings, ``Bcc`` never present, dots not yet stuffed.

    A mailbox with a non-ASCII local part needs SMTPUTF8 (RFC 6531): such a message is built by
    :func:`build_message` and serialised by :func:`~oncebeat.mail.message_bytes`, as before.

    Returns:
        bytes: 7-bit ASCII, e.g. ``b"From: Billing <billing@example.com>\r\nTo: ..."``.

    Raises:
        ValueError: as :func:`build_message`.
    """
    p = _prepare(sender=sender, to=to, subject=subject, message_id=message_id, reply_to=reply_to, headers=headers,
                 date=date)
    return _bytes_of(p, text=text, html=html, args=dict(sender=sender, to=to, subject=subject, text=text, html=html,
                                                       message_id=message_id, reply_to=reply_to, headers=headers,
                                                       date=date))


def build_message_envelope(
    *,
    sender: str | Address,
    to: str | Address,
    subject: str,
    text: str,
    html: str | None,
    message_id: str,
    reply_to: str | Address | None = None,
    headers: Mapping[str, str] | None = None,
    date: datetime | None = None,
    cc: Sequence[str | Address] = (),
    bcc: Sequence[str | Address] = (),
) -> tuple[bytes, Envelope]:
    """:func:`build_message_bytes` and the SMTP envelope of those bytes, from the same parsed addresses.

    The envelope is what :meth:`~oncebeat.mail.Mailer.send` would read back from the bytes' ``From`` and
    ``To`` (sender = ``From``, recipients = ``(To,)``, domains in IDNA form), without parsing them again:
    pass both to ``Mailer.send(data, envelope=envelope)``.

    ``cc``: mailboxes shown in a ``Cc`` header and added to the recipients. ``bcc``: mailboxes added to the
    envelope's recipients only, never written into the bytes (each checked like ``to``); a copy of those bytes
    read back therefore has no trace of them, and the frozen bytes' own envelope (:func:`~oncebeat.mail.smtp.
    envelope_of_bytes`) lacks them: a caller resending frozen bytes adds them again (:func:`with_recipients`).

    Returns:
        (bytes, Envelope): e.g. ``(b"From: Billing <billing@example.com>\r\n…",
        Envelope(sender="billing@example.com", recipients=("zoe@example.com",), utf8=False))``.

    Raises:
        ValueError: as :func:`build_message`.
    """
    p = _prepare(sender=sender, to=to, subject=subject, message_id=message_id, reply_to=reply_to, headers=headers,
                 date=date, cc=cc)
    hidden = tuple(parse_address(a, field=f"bcc[{n}]", deliverable=True) for n, a in enumerate(bcc))
    data = _bytes_of(p, text=text, html=html, args=dict(sender=sender, to=to, subject=subject, text=text, html=html,
                                                        message_id=message_id, reply_to=reply_to, headers=headers,
                                                        date=date, cc=cc))
    return data, envelope_of(p.sender, (p.to, *p.cc, *hidden))


def with_recipients(envelope: Envelope, extra: Sequence[str | Address]) -> Envelope:
    """``envelope`` with the mailboxes ``extra`` (e.g. the BCC of a message read back from its bytes) added to its
    recipients, repeats dropped, order kept.

    Raises:
        ValueError: a mailbox is not a deliverable address.
    """
    specs = list(envelope.recipients)
    for n, a in enumerate(extra):
        spec = envelope_address(parse_address(a, field=f"bcc[{n}]", deliverable=True))
        if spec not in specs:
            specs.append(spec)
    return Envelope(sender=envelope.sender, recipients=tuple(specs), utf8=envelope.utf8 or not all(
        s.isascii() for s in specs))


def _bytes_of(p: _Prepared, *, text: str, html: str | None, args: dict[str, Any]) -> bytes:
    """The RFC 5322 bytes of prepared headers ``p`` and the bodies (``args``: the builder's own arguments, for
    the SMTPUTF8 path, which stays the email package's)."""
    mailboxes = (p.sender, p.to, *p.cc) if p.reply_to is None else (p.sender, p.to, *p.cc, p.reply_to)
    if not all(a.username.isascii() for a in mailboxes):
        from .smtp import message_bytes  # the SMTPUTF8 path stays the email package's

        return message_bytes(build_message(**args))
    out = [_fold("From", _mailbox_tokens(p.sender)), _fold("To", _mailbox_tokens(p.to))]
    if p.cc:
        out.append(_fold("Cc", [t for n, a in enumerate(p.cc) for t in _cc_tokens(a, last=n == len(p.cc) - 1)]))
    if p.reply_to is not None:
        out.append(_fold("Reply-To", _mailbox_tokens(p.reply_to)))
    out += [_fold("Subject", _text_tokens(p.subject)), f"Date: {p.date}\r\n", f"Message-ID: {p.message_id}\r\n"]
    out += [_fold(name, _text_tokens(value)) for name, value in p.extra]
    out.append("MIME-Version: 1.0\r\n")
    parts = [_text_part("plain", text)] + ([_text_part("html", html)] if html is not None else [])
    if len(parts) == 1:
        out.append(parts[0])
    else:
        boundary = "=_oncebeat_" + hashlib.sha256(p.message_id.encode("ascii")).hexdigest()[:24]
        while any(f"--{boundary}" in part for part in parts):  # only a 7bit part can hold it
            boundary += "_"
        out.append(f'Content-Type: multipart/alternative;\r\n boundary="{boundary}"\r\n\r\n')
        for part in parts:
            out.append(f"--{boundary}\r\n{part}\r\n")  # that CRLF belongs to the next delimiter (RFC 2046)
        out.append(f"--{boundary}--\r\n")
    return "".join(out).encode("ascii")


_MAX_LINE = 78  # RFC 5322 §2.1.1: lines SHOULD be at most 78 characters (998 is the hard limit)
_WORD_BYTES = 42  # UTF-8 bytes per encoded-word: base64 56 chars + 12 of "=?utf-8?b?…?=" stays within 75


def _encoded_words(value: str) -> list[str]:
    """``value`` as RFC 2047 base64 encoded-words, split on character boundaries; whitespace between
    adjacent encoded-words is dropped by decoders, so the words decode to exactly ``value``."""
    words: list[str] = []
    chunk = bytearray()
    for ch in value:
        b = ch.encode("utf-8", "surrogatepass")
        if len(chunk) + len(b) > _WORD_BYTES:
            words.append(f"=?utf-8?b?{binascii.b2a_base64(bytes(chunk), newline=False).decode('ascii')}?=")
            chunk.clear()
        chunk += b
    if chunk:
        words.append(f"=?utf-8?b?{binascii.b2a_base64(bytes(chunk), newline=False).decode('ascii')}?=")
    return words


def _text_tokens(value: str) -> list[str]:
    """Tokens of an unstructured value (already sanitised): its space-separated words when it is ASCII
    and every word fits a line, else encoded-words."""
    if value.isascii():
        tokens = value.split(" ")
        if all(len(t) < 900 for t in tokens):
            return tokens
    return _encoded_words(value)


def _mailbox_tokens(addr: Address) -> list[str]:
    """Tokens of one mailbox: an ASCII display name quoted as RFC 5322 needs (``formataddr``), a
    non-ASCII one as encoded-words, then ``<addr-spec>``."""
    spec = addr.addr_spec
    name = addr.display_name
    if not name:
        return [spec]
    if name.isascii() and len(name) < 900:
        return email.utils.formataddr((name, spec)).split(" ")
    return [*_encoded_words(name), f"<{spec}>"]


def _cc_tokens(addr: Address, *, last: bool) -> list[str]:
    """Tokens of one mailbox of an address list: a comma after it unless it is the ``last``."""
    tokens = _mailbox_tokens(addr)
    return tokens if last else [*tokens[:-1], tokens[-1] + ","]


def _fold(name: str, tokens: list[str]) -> str:
    """``Name: token token …`` CRLF-terminated, folded (CRLF + the separating space) before 78 characters.

    Folding only inserts CRLF before an existing space, so unfolding gives back the value."""
    lines: list[str] = []
    line = f"{name}:"
    for token in tokens:
        if len(line) + 1 + len(token) > _MAX_LINE and line.strip() and line != f"{name}:":
            lines.append(line)
            line = " " + token
        else:
            line = f"{line} {token}"
    lines.append(line)
    return "\r\n".join(lines) + "\r\n"


def _text_part(subtype: str, body: str) -> str:
    """Content-Type, Content-Transfer-Encoding and body of one UTF-8 text part (7bit or quoted-printable)."""
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    if not body.endswith("\n"):
        body += "\n"
    if _cte(body) == "7bit":
        encoded = body.replace("\n", "\r\n")
        cte = "7bit"
    else:
        qp = binascii.b2a_qp(body.encode("utf-8", "surrogateescape"), quotetabs=False, istext=True, header=False)
        encoded = qp.decode("ascii").replace("\n", "\r\n")
        cte = "quoted-printable"
    return (f'Content-Type: text/{subtype}; charset="utf-8"\r\nContent-Transfer-Encoding: {cte}\r\n\r\n'
            f"{encoded}")


def _cte(body: str) -> str:
    """7bit for ASCII text (no long lines), quoted-printable otherwise."""
    if body.isascii() and all(len(line) <= 998 for line in body.splitlines()):
        return "7bit"
    return "quoted-printable"
