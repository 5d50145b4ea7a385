"""Sent mail as apps log it in their own words.

Action Mailer writes ``Delivered mail <id>``; most apps write their own line instead::

    Overdue reminder for INV-101 e-mailed to ap@globex.example: 250 2.0.0 Ok: queued as 4F0002A1
    Dunning digest sent to finance@acme.example (250 2.0.0 Ok: queued as 4F0001A1)
    Reminder for INV-201 e-mailed to ap@globex.example, SMTP said 250 Message accepted for delivery

The default :class:`MailMatcher` recognises a line that holds an e-mail address and either an SMTP ``250``
reply or one of the words *sent*, *e-mailed*, *emailed*, *mailed*, *delivered* — unless it says the mail was
not sent (*not sent*, *failed*, *bounced*, *could not*, *undeliverable*, *rejected*). ``--mail-pattern REGEX``
replaces the default with the user's own expression (searched in the message).

Linear in the line: addresses are found at each ``@`` (the first :data:`MAX_AT` of them) by bounded checks, not by
an unanchored address pattern (which retries a long run of word characters from each of its positions), and the
words are literal alternations. A user's pattern runs on the first :data:`USER_SPAN` characters of a message only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import ConfigError

__all__ = ["MailMatcher", "DEFAULT", "compile_mail_pattern", "MAX_AT", "USER_SPAN"]

MAX_AT = 20  # "@" signs looked at per message
USER_SPAN = 4096  # characters of a message a user's --mail-pattern sees
_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_DOMAIN = re.compile(r"[A-Za-z0-9-]{1,63}+(?:\.[A-Za-z0-9-]{1,63}+){1,8}+")
_ADDRESS_END = re.compile(r"[^A-Za-z0-9.-]|$")
_WORDS = re.compile(r"(?<![\w-])(?:sent|e-mailed|emailed|mailed|delivered)(?![\w-])|(?<!\d)250(?![\d.])",
                    re.IGNORECASE)
_NEGATIVE = re.compile(r"(?<!\w)(?:not sent|failed|bounced|could not|couldn't|undeliverable|rejected|error)(?!\w)",
                       re.IGNORECASE)


def _address(text: str) -> str | None:
    """The first e-mail address in ``text`` (bounded work per ``@``), or None."""
    start = 0
    for _ in range(MAX_AT):
        at = text.find("@", start)
        if at < 0:
            return None
        start = at + 1
        left = at
        while left > 0 and at - left < 64 and text[left - 1] in _LOCAL_CHARS:
            left -= 1
        if left == at or (left > 0 and text[left - 1] in ":/"):  # none, or a URL's user:password@host
            continue
        m = _DOMAIN.match(text, at + 1, min(len(text), at + 256))
        if m is None:
            continue
        return text[left:m.end()].strip(".")
    return None


@dataclass(frozen=True)
class MailMatcher:
    """Whether a message says a mail was sent; ``pattern`` None is the default rule (module docstring)."""

    pattern: re.Pattern[str] | None = None

    def match(self, message: str) -> dict[str, str] | None:
        """``{"to": address}`` (address may be empty for a user's pattern without one) when ``message`` is a sent
        mail, else None."""
        if self.pattern is not None:
            head = message[:USER_SPAN]
            m = self.pattern.search(head)
            if m is None:
                return None
            groups = m.groupdict()
            to = groups.get("to") or _address(head) or ""
            return {"to": to}
        if "@" not in message:
            return None
        to = _address(message)
        if to is None or _WORDS.search(message) is None or _NEGATIVE.search(message) is not None:
            return None
        return {"to": to}


DEFAULT = MailMatcher()


def compile_mail_pattern(text: str | None) -> MailMatcher:
    """The matcher of ``--mail-pattern`` (None or empty: :data:`DEFAULT`).

    Raises:
        ConfigError: the expression does not compile (the position and the fix named).
    """
    if not text:
        return DEFAULT
    try:
        return MailMatcher(re.compile(text))
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise ConfigError(f"--mail-pattern {text!r} is not a valid regular expression: {exc.msg}{where}; give a "
                          "Python regular expression such as 'e-mailed to (?P<to>\\S+)'") from exc
