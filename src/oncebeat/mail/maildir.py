"""Reading a Maildir: what a :class:`~oncebeat.mail.sink.MailSink` (or any Maildir writer) stored, oldest first.

Only the standard library: the doctor, the checker and the reminder app's accounting read a sink's Maildir through
this module without importing the SMTP server (aiosmtpd, asyncio) that writes it.

    for stored in read_maildir(tmp_path / "mail"):
        print(stored.message_id, stored.envelope_to)
    duplicates = {k: n for k, n in count_by_header(tmp_path / "mail", "Message-ID").items() if n > 1}
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field
from email import message_from_binary_file
from email import policy as email_policy
from email.message import EmailMessage
from pathlib import Path

__all__ = ["StoredMessage", "count_by_header", "read_maildir"]


@dataclass(frozen=True)
class StoredMessage:
    """A summary of one message stored in a Maildir.

    Attributes:
        message_id: The ``Message-ID`` header (``""`` if absent).
        to: The decoded ``To`` header (``""`` if absent).
        subject: The decoded ``Subject`` (``""`` if absent).
        headers: Every header, decoded; for repeated names the first one.
        envelope_to: The envelope recipients (``Delivered-To`` lines the sink adds).
        key: The Maildir key.
    """

    message_id: str
    to: str
    subject: str
    headers: dict[str, str] = field(hash=False)
    envelope_to: tuple[str, ...] = ()
    key: str = ""


_KEY_ORDER = re.compile(r"^(\d+)\.M(\d+)P(\d+)Q(\d+)")


def _key_order(key: str, path: Path) -> tuple[int, int, int, str]:
    m = _KEY_ORDER.match(key)
    if m:
        return (int(m.group(1)), int(m.group(2)), int(m.group(4)), key)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        mtime = 0
    return (mtime // 1_000_000_000, (mtime // 1000) % 1_000_000, 0, key)


def _parse(path: Path) -> EmailMessage:
    with path.open("rb") as fh:
        msg = message_from_binary_file(fh, policy=email_policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def read_maildir(maildir: Path | str) -> list[StoredMessage]:
    """Summarise every message in ``maildir`` (``new`` and ``cur``), oldest first.

    Args:
        maildir: A Maildir directory, e.g. the one a :class:`MailSink` writes.

    Returns:
        list[StoredMessage]: One entry per message, in delivery order; an
        empty list if the directory does not exist yet.
    """
    root = Path(maildir)
    entries: list[tuple[tuple[int, int, int, str], Path, str]] = []
    for sub in ("new", "cur"):
        folder = root / sub
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.startswith(".") or not path.is_file():
                continue
            key = path.name.split(":", 1)[0]
            entries.append((_key_order(key, path), path, key))
    entries.sort(key=lambda e: e[0])
    out: list[StoredMessage] = []
    for _, path, key in entries:
        try:
            msg = _parse(path)
        except FileNotFoundError:  # moved from new/ to cur/ meanwhile
            continue
        headers: dict[str, str] = {}
        for name, value in msg.items():
            headers.setdefault(name, str(value))
        out.append(
            StoredMessage(
                message_id=str(msg.get("Message-ID", "")).strip(),
                to=str(msg.get("To", "")),
                subject=str(msg.get("Subject", "")),
                headers=headers,
                envelope_to=tuple(str(v) for v in msg.get_all("Delivered-To", [])),
                key=key,
            )
        )
    return out


def count_by_header(maildir: Path | str, header: str) -> collections.Counter[str]:
    """Count stored messages by the value of ``header`` (case-insensitive name).

    ``count_by_header(md, "Message-ID")`` shows duplicates at a glance: any
    count above 1 is the same message delivered more than once.

    Args:
        maildir: A Maildir directory.
        header: Header name, e.g. ``"Message-ID"`` or ``"X-Oncebeat-Effect"``.

    Returns:
        collections.Counter[str]: Value -> number of messages; messages
        without the header are not counted.
    """
    wanted = header.lower()
    counts: collections.Counter[str] = collections.Counter()
    for stored in read_maildir(maildir):
        for name, value in stored.headers.items():
            if name.lower() == wanted:
                counts[value.strip()] += 1
                break
    return counts
