"""Masking secrets in text that may reach a log, an error message or a report.

One rule for every URL-like credential (``DATABASE_URL``, ``SMTP_URL``), with or
without a scheme: ``scheme://user:secret@host`` and ``user:secret@host`` both
become ``…user:***@host``.
"""

from __future__ import annotations

import re

__all__ = ["redact_url"]

# user:password@ (the password may hold '@' and ':') after "://", at the start, or after whitespace/quote/paren/equals.
_CREDENTIAL = re.compile(r"""(?P<head>(?:://|^|(?<=[\s'"(=]))[^\s:/@'"]*:)(?P<pw>[^\s/'"]*)@""")


def redact_url(text: str) -> str:
    """Return ``text`` with the password of every ``user:password@host`` replaced by ``***``."""
    return _CREDENTIAL.sub(lambda m: f"{m.group('head')}***@", text)
