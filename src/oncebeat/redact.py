"""Masking secrets in text that may reach a screen, a log, an error message, JSON or the audit trail.

One rule for every URL the project prints (``DATABASE_URL``, ``SMTP_URL``), well-formed or not,
applied by :func:`redact_url` in three layers:

1. **Passwords in the userinfo**: ``scheme://user:secret@host`` and ``user:secret@host`` become
   ``…user:***@host``. The password runs to the *last* ``@`` of the token, so an unencoded ``@``,
   ``/``, ``?`` or ``#`` in it is still hidden (hiding too much beats showing a secret).
2. **Secret query parameters and libpq ``key=value`` options**: in a query (``?…&…``) the values
   of ``password``, ``passfile``, ``sslpassword``, ``token``, ``key`` and any name ending in
   ``password``, ``passfile``, ``token``, ``secret`` or ``key`` become ``***``; in libpq's
   ``password=… host=…`` form, those of the names ending in ``password``, ``passfile`` or
   ``secret``.
3. **Secrets seen before**: :func:`remember_secrets` (called for every URL the project is given,
   by ``open_store``, the stores, ``parse_smtp_url`` and the CLI) records each password and
   secret parameter, percent-decoded too, with the pieces an unencoded ``/ @ ? # : space " '``
   splits it into. Any of them found anywhere in a text is masked, so a driver's
   ``failed to resolve host 'S3cret@127.0.0.1'`` (libpq cut the URL at another ``@``) or
   ``invalid port`` shows ``***`` instead. Pieces shorter than
   :data:`MIN_REMEMBERED` characters are not remembered (they would mask ordinary words); the
   structural layers 1-2 still hide them inside URLs.

:class:`RedactingFilter` applies the same rule to every log record it sees; the CLI installs it on
its log handler.

Example::

    >>> redact_url("postgresql://app:pa/ss@db.example.test/app?sslpassword=x&sslmode=require")
    'postgresql://app:***@db.example.test/app?sslpassword=***&sslmode=require'
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import unquote

__all__ = ["redact_url", "unencoded_password", "remember_secrets", "forget_secrets", "RedactingFilter",
           "SECRET_PARAMETERS", "MIN_REMEMBERED", "url_secret"]

#: Query / conninfo parameters whose values are secrets (names ending in these are secret too).
SECRET_PARAMETERS = ("password", "passfile", "sslpassword", "token", "key", "secret")
#: The shortest remembered secret (or piece of one) masked wherever it appears in free text.
MIN_REMEMBERED = 3

MASK = "***"

# user:password@ after "://", at the start, or after whitespace/quote/paren/equals. The user holds no
# ':' '/' '@' (and a scheme's 'postgresql:' followed by '//' is no user); the password runs greedily to the
# last '@' before whitespace or a quote.
_USERINFO = re.compile(r"""(?P<head>(?:://|^|(?<=[\s'"(=<]))[^\s:/@'"<>]*:)(?!//)(?P<pw>[^\s'"<>]*)@""")
# name=value in a URL query (after ? & ;) for any secret name; in libpq's "password=… host=…" form
# (after whitespace, a quote, a parenthesis, a comma or the start) only for the *password* names, so a
# log line's "key=reminder:7" stays readable.
_VALUE = r"""(?P<value>'(?:[^'\\]|\\.)*'|"[^"]*"|[^&\s'"#)]*)"""
_QUERY_PARAM = re.compile(
    rf"""(?P<head>(?<=[?&;])(?i:[A-Za-z_]*(?:password|passfile|token|secret|key))\s*=\s*){_VALUE}"""
)
_CONNINFO_PARAM = re.compile(
    rf"""(?P<head>(?:^|(?<=[\s'"(,]))(?i:[A-Za-z_]*(?:password|passfile|secret))\s*=\s*){_VALUE}"""
)
_PARAMS = (_QUERY_PARAM, _CONNINFO_PARAM)
# What an unencoded password is cut into by URL parsers and error messages.
_PIECES = re.compile(r"""[/@?#:\s"'&=;,%]+""")
# Where a userinfo match can start, the run of user characters after it, and what ends a token (no part of a match
# but the character before it crosses one): :func:`_mask_userinfo` tries _USERINFO only where it can match.
_USERINFO_START = re.compile(r"""://|^|(?<=[\s'"(=<])""")
_USER_RUN = re.compile(r"""[^\s:/@'"<>]*""")
_TOKEN_END = re.compile(r"""[\s'"<>]""")
# A host[:port] after the userinfo '@': what makes an '@' the end of the password.
_HOST_AFTER_AT = re.compile(r"@[A-Za-z0-9.\-_\[\]:%]*(?=[/?#]|$)")

_lock = threading.Lock()
_remembered: set[str] = set()
_pattern: re.Pattern[str] | None = None


def _userinfo_password(url: str) -> str | None:
    """The password of ``url``'s userinfo as written (``None`` if it has none), tolerating unencoded specials."""
    text = url.strip()
    start = text.find("://")
    start = start + 3 if start != -1 else 0
    # The userinfo ends at the last '@' followed by something host-like: 'u:p@ss@host/db' -> 'u:p@ss'.
    ends = [m.start() for m in _HOST_AFTER_AT.finditer(text, start)]
    end = ends[-1] if ends else text.rfind("@")
    if end < start:
        return None
    _user, colon, password = text[start:end].partition(":")
    return password if colon else None


# Characters a URL parser reads as structure: in a password they must be percent-encoded.
_RESERVED_IN_PASSWORD = {"/": "%2F", "?": "%3F", "#": "%23", "@": "%40", " ": "%20", '"': "%22", "'": "%27"}


def unencoded_password(url: str) -> str | None:
    """Why ``url``'s userinfo password cannot be parsed as written (``None`` when it can).

    A password holding an unencoded ``/ ? # @ space " '`` is cut by every URL parser at that character, so
    the parser's own error ("Port could not be cast to integer value as 'pa'", "failed to resolve host
    'ss@db'") would mislead and may show part of the password. The reason returned names the characters and
    their percent-encodings, never the password.
    """
    password = _userinfo_password(url)
    if not password:
        return None
    found = sorted({c for c in password if c in _RESERVED_IN_PASSWORD}, key=list(_RESERVED_IN_PASSWORD).index)
    if not found:
        return None
    shown = ", ".join(f"{c!r} as {_RESERVED_IN_PASSWORD[c]}" for c in found)
    return (f"the password holds {len(found)} character(s) a URL reserves; percent-encode them ({shown}), e.g. "
            "python3 -c 'import urllib.parse,getpass; print(urllib.parse.quote(getpass.getpass(), safe=\"\"))'")


def _param_values(url: str) -> list[str]:
    return [m.group("value").strip("'\"") for p in _PARAMS for m in p.finditer(url)]


def _candidates(secret: str) -> set[str]:
    out = {secret, unquote(secret)}
    for s in (secret, unquote(secret)):
        out.update(_PIECES.split(s))
    return {s for s in out if len(s) >= MIN_REMEMBERED}


def remember_secrets(url: str | None) -> None:
    """Record the secrets of ``url`` (password, secret query parameters) so every later redaction hides them.

    Safe to call with any text, several times, from any thread; ``None`` and URLs without secrets are
    ignored. The secrets are kept in this process's memory only.
    """
    if not url:
        return
    found: set[str] = set()
    password = _userinfo_password(url)
    if password:
        found |= _candidates(password)
    for value in _param_values(url):
        found |= _candidates(value)
    if not found - _remembered:
        return
    global _pattern
    with _lock:
        _remembered.update(found)
        alternatives = sorted(_remembered, key=len, reverse=True)  # longest first: no piece left half-masked
        _pattern = re.compile("|".join(re.escape(s) for s in alternatives))


def url_secret(url: str) -> str | None:
    """What in ``url`` is a secret, or None: ``"a password"`` (userinfo) or ``"the <name> parameter"`` for a query
    parameter of :data:`SECRET_PARAMETERS` (``?password=``, ``?token=``, ``?sslpassword=``, ...). For the settings
    that must not hold one (they are stored in the database or a file): write ``$VARIABLE`` instead."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return None
    if password:
        return "a password"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() in SECRET_PARAMETERS or name.lower() in ("pass", "pwd", "passwd", "access_token", "api_key"):
            return f"the {name} parameter"
    return None


def redact_url(text: str) -> str:
    """Return ``text`` with every password and secret URL parameter replaced by ``***``.

    Args:
        text: A URL, or any message that may contain one or pieces of one (a driver error).

    Returns:
        str: The text with the userinfo password, secret parameter values and every secret recorded by
        :func:`remember_secrets` masked (see the module docstring for the rules); never blank for a text that
        is not (``***`` then).
    """
    original = text = str(text)
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _mask_userinfo(text)
    for param in _PARAMS:
        text = param.sub(lambda m: f"{m.group('head')}{MASK}" if m.group("value") else m.group(0), text)
    if original.strip() and not text.strip():  # never an empty URL on screen for a non-empty one
        return MASK
    return text


def _mask_userinfo(text: str) -> str:
    """``_USERINFO.sub(head + MASK + "@", text)`` in time linear in ``text``.

    The plain ``sub`` retries the pattern at every position, and each try scans the rest of a run of user
    characters or of a token: quadratic (32 s on 64 KiB of ``=`` and a ``:``, which a log line shown by
    ``doctor --logs`` can hold). The result is the same when the pattern is tried only where a try can differ
    from the one before: a match lies inside one token (no whitespace, quote, ``<`` or ``>``) and needs an ``@``
    in it, and every start inside one run of user characters ends that run at the same character.
    """
    if "@" not in text:
        return text
    out: list[str] = []
    last = p = 0
    n = len(text)
    next_at = text.find("@")
    token_end = -1  # the first token-ending character at or after p (kept while p has not passed it)
    while 0 <= next_at and p < n:
        s = _USERINFO_START.search(text, p)
        if s is None:
            break
        p = s.start()
        if token_end < p:
            end = _TOKEN_END.search(text, p)
            token_end = end.start() if end is not None else n
        if token_end == p:  # a start on whitespace or a quote: its user run is empty and ':' is not there
            p += 1
            continue
        if next_at < p:
            next_at = text.find("@", p)
            if next_at < 0:
                break
        if next_at >= token_end:  # no '@' before this token ends: nothing in it can match
            p = token_end
            continue
        m = _USERINFO.match(text, p)
        if m is not None:
            out += [text[last:m.start()], m.group("head"), MASK, "@"]
            last = p = m.end()
            continue
        # the user run from here (after "://" when it starts one) ends the same way for every later start in it
        run = _USER_RUN.match(text, p + 3 if text.startswith("://", p) else p)
        p = max(run.end() if run is not None else p, p + 1)
    out.append(text[last:])
    return "".join(out)


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets (:func:`redact_url`) in every record's message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_url(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            # Render the traceback now, masked, so the handler prints that instead of the raw one.
            record.exc_text = redact_url(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact_url(record.exc_text)
        return True


def forget_secrets() -> None:
    """Forget every secret :func:`remember_secrets` recorded (tests; a process that rotated its credentials)."""
    global _pattern
    with _lock:
        _remembered.clear()
        _pattern = None
