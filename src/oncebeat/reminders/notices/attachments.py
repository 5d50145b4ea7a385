"""Attachments of a reminder: the invoice PDF and a statement of account, frozen with the message.

The ``[attachments]`` section of oncebeat.toml::

    [attachments]
    invoice_pdf = true              # attach each invoice's PDF (default false)
    pdf_dir = "invoices/pdf"        # the one folder invoice PDFs are read from (relative: to oncebeat.toml)
    statement = "final"             # "never" (default), "final" (the ladder's last stage), "always",
                                    # or the stages that carry one, e.g. [14, 30]
    max_attachment_bytes = 10485760 # all files of one reminder together (default 10 MiB), before base64

Which file is an invoice's PDF, exactly:

* the invoice's ``pdf_path`` (CSV column ``pdf_path``, the SQL source's ``AS pdf_path``) when it has one: a path
  relative to ``pdf_dir`` (or an absolute path inside it);
* otherwise ``<pdf_dir>/<invoice number>.pdf``: the number exactly as imported (case-sensitive), ``.pdf`` in lower
  case, directly in ``pdf_dir`` (no sub-folder). A number that cannot be a file name there (holding ``/``, ``\\``,
  a control character, or starting with ``.``) matches no file: the reminder fails naming the invoice.

Path traversal is refused: the path is resolved (``..`` and every symlink followed) and must lie inside the
resolved ``pdf_dir``; a path or symlink leading out of it fails the reminder with a reason naming both. Only a
regular file is read (never a FIFO or a device), at most ``max_attachment_bytes``, and it must start with
``%PDF-``.

A reminder promised an attachment is never sent without it: a missing, unreadable, oversized or non-PDF file
records the reminder ``failed`` with a reason naming the invoice and the file, and nothing is sent; after fixing
the file, ``oncebeat reminders retry --failed`` sends it (nothing is lost, nothing goes out incomplete).

The message is built by :mod:`oncebeat.mail.message` as usual and wrapped here into ``multipart/mixed``
(:func:`attach`): the text or text+HTML body first, then each PDF as ``application/pdf``, base64, with a file
name made safe (:func:`safe_filename`: letters, digits, ``.``, ``-``, ``_``; anything else, quotes, CR and LF
included, becomes ``_``) and RFC 2231-encoded when it is not ASCII. The send job wraps the message once, before
the effect freezes it; a retry sends the frozen bytes and never builds attachments again
(:func:`with_attachments`).
"""

from __future__ import annotations

import base64
import email
import email.policy
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ...errors import ConfigError, OncebeatError
from ...textsafe import strip_format_characters

__all__ = ["DEFAULT_MAX_BYTES", "Attachment", "AttachmentError", "AttachmentPolicy", "attach", "attachments_config",
           "attachments_of", "read_invoice_pdf", "safe_filename"]

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # 10 MiB: what most relays and mailboxes take once base64 adds its third
STATEMENT_CHOICES = ("never", "final", "always")
_NAME_JUNK = re.compile(r"[^\w.-]+")  # \w: letters and digits of any script, and "_"
_MAX_NAME = 80  # characters of a file name shown to the customer (a long invoice number is cut)
_FOLD_CHUNK = 60  # characters of a percent-encoded RFC 2231 section: each header line stays under 78


class AttachmentError(OncebeatError):
    """An attachment a reminder must carry cannot be made: the message names the invoice, the file and the fix.

    The send records the reminder ``failed`` with this text; nothing is sent."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AttachmentPolicy:
    """The validated ``[attachments]`` section (see the module docstring)."""

    invoice_pdf: bool = False
    pdf_dir: Path | None = None
    statement: str | tuple[int, ...] = "never"  # never | final | always, or the stages (days) that carry one
    max_attachment_bytes: int = DEFAULT_MAX_BYTES

    def wants_statement(self, stage: int, stages: Sequence[int]) -> bool:
        """Whether a reminder of ``stage`` (days, one of the ladder's ``stages``) carries a statement."""
        if isinstance(self.statement, tuple):
            return stage in self.statement
        return self.statement == "always" or (self.statement == "final" and bool(stages) and stage == max(stages))

    def any_for(self, stage: int, stages: Sequence[int]) -> bool:
        """Whether a reminder of ``stage`` carries any attachment."""
        return self.invoice_pdf or self.wants_statement(stage, stages)


@dataclass(frozen=True, kw_only=True, slots=True)
class Attachment:
    """One file of a message: its safe file name, MIME type and bytes."""

    filename: str
    content_type: str
    data: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


# --------------------------------------------------------------------------- configuration

def attachments_config(content: Any, *, source: str, base_dir: Path | None) -> AttachmentPolicy:
    """Validate the ``[attachments]`` table of ``source`` into an :class:`AttachmentPolicy`.

    ``pdf_dir`` relative: to ``base_dir`` (the folder of oncebeat.toml) when given; it must then be a folder.

    Raises:
        ConfigError: every problem at once, each naming ``[attachments] key``, the value and the fix.
    """
    if not isinstance(content, dict):
        raise ConfigError(f"{source}: attachments must be a table. Write it as an [attachments] section header "
                          "followed by its keys.")
    problems: list[str] = []
    values: dict[str, Any] = {}
    allowed = ("invoice_pdf", "pdf_dir", "statement", "max_attachment_bytes")
    for key, raw in content.items():
        where = f"[attachments] {key} = {raw!r}"
        if key == "invoice_pdf":
            if not isinstance(raw, bool):
                problems.append(f"{where} must be true or false.")
            else:
                values[key] = raw
        elif key == "pdf_dir":
            if not isinstance(raw, str) or not raw.strip():
                problems.append(f"{where} must be a folder path, e.g. pdf_dir = \"invoices/pdf\".")
                continue
            folder = Path(raw).expanduser()
            if base_dir is not None and not folder.is_absolute():
                folder = Path(base_dir).absolute() / folder
            if base_dir is not None and not folder.is_dir():
                problems.append(f"{where}: folder {str(folder)!r} does not exist. Create it or fix the path.")
                continue
            values[key] = folder
        elif key == "statement":
            if isinstance(raw, str) and raw in STATEMENT_CHOICES:
                values[key] = raw
            elif (isinstance(raw, list) and raw and all(isinstance(s, int) and not isinstance(s, bool) for s in raw)):
                values[key] = tuple(sorted(set(raw)))
            else:
                problems.append(f"{where} must be \"never\", \"final\", \"always\" or a list of the ladder's stages "
                                "that carry a statement, e.g. statement = [14, 30].")
        elif key == "max_attachment_bytes":
            if not isinstance(raw, int) or isinstance(raw, bool) or not 1024 <= raw <= 50 * 1024 * 1024:
                problems.append(f"{where} must be a whole number of bytes from 1024 to 52428800 (50 MiB), e.g. "
                                "max_attachment_bytes = 10485760.")
            else:
                values[key] = raw
        else:
            problems.append(f"[attachments] {key} is not a known key. Allowed keys: {', '.join(allowed)}.")
    if values.get("invoice_pdf") and "pdf_dir" not in values and not problems:
        problems.append("[attachments] invoice_pdf = true needs pdf_dir: the one folder invoice PDFs are read from "
                        "(a pdf_path column is read relative to it). Add pdf_dir = \"invoices/pdf\".")
    if problems:
        text = problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n" + "\n".join(
            f"  - {p}" for p in problems)
        raise ConfigError(f"{source}: {text}")
    return AttachmentPolicy(**values)


# --------------------------------------------------------------------------- reading an invoice PDF

def safe_filename(name: str, *, suffix: str = ".pdf") -> str:
    """``name`` as a file name safe in a MIME header and on any disk: letters and digits of any script, ``.``, ``-``
    and ``_`` kept, every other run of characters (quotes, slashes, CR, LF, spaces, controls) one ``_``, no leading
    dot, at most 80 characters, ending in ``suffix``. ``'INV "7"\\r\\nBcc: x'`` → ``'INV_7_Bcc_x.pdf'``."""
    stem = _NAME_JUNK.sub("_", strip_format_characters(name)).strip("._") or "attachment"
    if stem.lower().endswith(suffix):
        stem = stem[: -len(suffix)] or "attachment"
    return stem[: _MAX_NAME - len(suffix)] + suffix


def _number_problem(number: str) -> str | None:
    if not number or "/" in number or "\\" in number or number.startswith("."):
        return "holds '/' or '\\' or starts with '.'"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in number):
        return "holds a control character"
    return None


def read_invoice_pdf(policy: AttachmentPolicy, *, number: str, pdf_path: str | None, limit: int) -> Attachment:
    """The PDF of invoice ``number`` as the module docstring says (``pdf_path`` first, else ``<number>.pdf``).

    Args:
        limit: the most bytes the file may have (what is left of ``max_attachment_bytes``).
    Returns:
        The attachment, named ``<number>.pdf`` made safe (:func:`safe_filename`), ``application/pdf``.
    Raises:
        AttachmentError: no ``pdf_dir``, an unusable number, a path out of the folder, a missing, unreadable,
            non-regular, too large or non-PDF file; the text names the invoice and the file.
    """
    if policy.pdf_dir is None:
        raise AttachmentError(f"invoice {number!r}: [attachments] invoice_pdf needs pdf_dir; add it to oncebeat.toml")
    root = os.path.realpath(policy.pdf_dir)
    if pdf_path:
        where = f"pdf_path {pdf_path!r}"
        candidate = os.path.join(root, pdf_path)  # an absolute pdf_path replaces root: checked like any other
    else:
        problem = _number_problem(number)
        if problem:
            raise AttachmentError(f"invoice {number!r}: its number {problem}, so no file in pdf_dir {root!r} can be "
                                  "its PDF; give the invoice a pdf_path (CSV column pdf_path) instead")
        where = f"file {number + '.pdf'!r}"
        candidate = os.path.join(root, number + ".pdf")
    real = os.path.realpath(candidate)
    if os.path.commonpath([root, real]) != root or real == root:
        raise AttachmentError(f"invoice {number!r}: {where} leads to {real!r}, outside [attachments] pdf_dir {root!r} "
                              "(a '..' or a symlink out of the folder); oncebeat reads invoice PDFs only from inside "
                              "pdf_dir: move the file there")
    try:
        # O_NONBLOCK: a FIFO put in the folder must not hang the worker (it is refused below, not read).
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise AttachmentError(f"invoice {number!r}: its PDF is missing ({where} in pdf_dir {root!r}); put the file "
                              "there, then `oncebeat reminders retry --failed` sends the reminder") from None
    except OSError as exc:
        raise AttachmentError(f"invoice {number!r}: its PDF {real!r} cannot be read ({exc.strerror}); fix its "
                              "permissions, then `oncebeat reminders retry --failed` sends the reminder") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise AttachmentError(f"invoice {number!r}: {real!r} is not a regular file; put the invoice's PDF there")
        if info.st_size > limit:
            raise AttachmentError(f"invoice {number!r}: its PDF {real!r} has {info.st_size} bytes, over the "
                                  f"{limit} bytes left of [attachments] max_attachment_bytes; shrink the file or raise "
                                  "the limit")
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise AttachmentError(f"invoice {number!r}: its PDF {real!r} cannot be read ({exc.strerror})") from None
    if len(data) > limit:  # it grew between the check and the read
        raise AttachmentError(f"invoice {number!r}: its PDF {real!r} is over the {limit} bytes left of "
                              "[attachments] max_attachment_bytes")
    if not data.startswith(b"%PDF-"):
        raise AttachmentError(f"invoice {number!r}: {real!r} is not a PDF (it does not start with %PDF-); put the "
                              "invoice's PDF there")
    return Attachment(filename=safe_filename(number), content_type="application/pdf", data=data)


def pdf_path_reason(value: str) -> str | None:
    """Why ``value`` cannot be an invoice's ``pdf_path`` (import time: the file itself is checked when sent), or
    None: at most 1024 characters, no control character, no ``..`` part (a path must stay inside pdf_dir)."""
    fix = "write the PDF's path inside [attachments] pdf_dir, e.g. 2026/INV-1001.pdf, or leave the cell empty"
    if len(value) > 1024:
        return f"is longer than 1024 characters: {fix}"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return f"holds a control character (a line break?): {fix}"
    if ".." in re.split(r"[/\\]", value):
        return f"holds a '..' part, which would leave pdf_dir: {fix}"
    return None


# --------------------------------------------------------------------------- MIME

def _param(name: str, value: str) -> list[str]:
    """``name="value"`` for an ASCII value, else RFC 2231 ``name*0*=utf-8''…; name*1*=…`` sections (each short
    enough to keep its header line under 78 characters). ``value`` is already a :func:`safe_filename`."""
    if value.isascii():
        return [f'{name}="{value}"']
    encoded = quote(value, safe="")  # %XX for every non-ASCII byte; the safe name holds no other special character
    chunks: list[str] = []
    while encoded:
        cut = min(_FOLD_CHUNK, len(encoded))
        while cut < len(encoded) and "%" in encoded[max(0, cut - 2):cut]:  # never split a %XX
            cut -= 1
        chunks.append(encoded[:cut])
        encoded = encoded[cut:]
    if len(chunks) == 1:
        return [f"{name}*=utf-8''{chunks[0]}"]
    return [f"{name}*{n}*={'utf-8' + chr(39) * 2 if n == 0 else ''}{c}" for n, c in enumerate(chunks)]


def _part(a: Attachment) -> bytes:
    name = safe_filename(a.filename)  # again here: no name reaches a header unmade safe, whoever built it
    ctype = ";\r\n ".join([a.content_type, *(_param("name", name) if name.isascii() else [])])
    disposition = ";\r\n ".join(["attachment", *_param("filename", name)])
    body = base64.encodebytes(a.data).replace(b"\n", b"\r\n")  # 76-character lines
    return (f"Content-Type: {ctype}\r\nContent-Disposition: {disposition}\r\nContent-Transfer-Encoding: base64\r\n"
            "\r\n").encode("ascii") + body


def attach(data: bytes, attachments: Sequence[Attachment], *, seed: str) -> bytes:
    """The message ``data`` (RFC 5322 bytes, CRLF, as :func:`oncebeat.mail.build_message_bytes` makes them) with
    ``attachments`` after its body, as ``multipart/mixed``; ``data`` itself when there are none.

    Only the top-level ``Content-Type`` and ``Content-Transfer-Encoding`` move (into the first part); every other
    header stays as built. The boundary is derived from ``seed`` (the Message-ID), so the same message and files
    give the same bytes.
    """
    if not attachments:
        return data
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("attach: the message has no header/body separator")
    fields: list[bytes] = []
    for line in head.split(b"\r\n"):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1] += b"\r\n" + line
        else:
            fields.append(line)
    moved = [f for f in fields if f.split(b":", 1)[0].strip().lower() in (b"content-type",
                                                                         b"content-transfer-encoding")]
    kept = [f for f in fields if f not in moved]
    parts = [b"\r\n".join(moved) + b"\r\n\r\n" + body, *(_part(a) for a in attachments)]
    boundary = "=_oncebeat_mixed_" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:24]
    while any(f"--{boundary}".encode("ascii") in p for p in parts):
        boundary += "_"
    out = [b"\r\n".join(kept), f'\r\nContent-Type: multipart/mixed;\r\n boundary="{boundary}"\r\n\r\n'.encode()]
    for p in parts:
        out.append(f"--{boundary}\r\n".encode("ascii") + p + b"\r\n")  # that CRLF belongs to the next delimiter
    out.append(f"--{boundary}--\r\n".encode("ascii"))
    return b"".join(out)


def attachments_of(data: bytes) -> list[Attachment]:
    """The attachments of message ``data`` as a mail client reads them (``email`` package, ``policy.default``)."""
    if b"multipart/mixed" not in data.partition(b"\r\n\r\n")[0]:
        return []
    msg = email.message_from_bytes(data, policy=email.policy.default)
    found = []
    for part in msg.iter_attachments():
        payload = part.get_payload(decode=True)
        found.append(Attachment(filename=part.get_filename() or "attachment", content_type=part.get_content_type(),
                                data=payload if isinstance(payload, bytes) else b""))
    return found
