"""Mail: RFC 5322 messages, SMTP delivery with error classification, a local sink.

Layer rule: this package uses only the stdlib, aiosmtpd, :mod:`oncebeat.errors`,
:mod:`oncebeat.timebase` and the telemetry seam of :mod:`oncebeat.telemetry`.

* :func:`build_message` / :func:`make_message_id` — safe message construction
  (no header injection, non-ASCII names, deterministic ``Message-ID``);
  :func:`build_message_bytes` — the same message as bytes, assembled directly.
* :class:`Mailer` / :func:`parse_smtp_url` — delivery over ``SMTP_URL`` with
  connection reuse; 4xx/network -> ``TransientMailError``, 5xx ->
  ``PermanentMailError``; passwords are never shown.
* :class:`MailSink` / :func:`read_maildir` — a real local SMTP server storing
  into a Maildir, with runtime fault injection for tests and the simulator;
  reading a Maildir needs no SMTP server (:mod:`.maildir`).

Importing this package imports none of its modules: each name is looked up in its
module on first use (PEP 562), so a process that only reads a Maildir or builds
messages never imports the sink's aiosmtpd and asyncio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .maildir import StoredMessage, count_by_header, read_maildir
    from .message import (
        RESERVED_HEADERS,
        Envelope,
        address_problem,
        build_message,
        build_message_bytes,
        build_message_envelope,
        idna_domain,
        make_message_id,
        parse_address,
        sanitize_header_text,
        with_recipients,
    )
    from .sink import MailSink, SinkCounters, SinkFaults, serve_forever
    from .smtp import (
        DEFAULT_TIMEOUT,
        Mailer,
        SmtpUrl,
        envelope_of_bytes,
        message_bytes,
        parse_smtp_url,
        redact_url,
    )

#: The module of each public name.
_HOMES = {
    "RESERVED_HEADERS": "message",
    "Envelope": "message",
    "address_problem": "message",
    "build_message": "message",
    "build_message_bytes": "message",
    "build_message_envelope": "message",
    "idna_domain": "message",
    "make_message_id": "message",
    "parse_address": "message",
    "sanitize_header_text": "message",
    "with_recipients": "message",
    "StoredMessage": "maildir",
    "count_by_header": "maildir",
    "read_maildir": "maildir",
    "MailSink": "sink",
    "SinkCounters": "sink",
    "SinkFaults": "sink",
    "serve_forever": "sink",
    "DEFAULT_TIMEOUT": "smtp",
    "Mailer": "smtp",
    "SmtpUrl": "smtp",
    "envelope_of_bytes": "smtp",
    "message_bytes": "smtp",
    "parse_smtp_url": "smtp",
    "redact_url": "smtp",
}

__all__ = [
    "DEFAULT_TIMEOUT",
    "RESERVED_HEADERS",
    "Envelope",
    "MailSink",
    "Mailer",
    "SinkCounters",
    "SinkFaults",
    "SmtpUrl",
    "StoredMessage",
    "address_problem",
    "build_message",
    "build_message_bytes",
    "build_message_envelope",
    "count_by_header",
    "envelope_of_bytes",
    "idna_domain",
    "make_message_id",
    "message_bytes",
    "parse_address",
    "parse_smtp_url",
    "read_maildir",
    "redact_url",
    "sanitize_header_text",
    "serve_forever",
    "with_recipients",
]


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())
