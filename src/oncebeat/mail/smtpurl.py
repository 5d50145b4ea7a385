"""The ``SMTP_URL`` setting: one URL names the server, its transport, the login and the socket timeout.

==================================================  ==========================  ============
URL                                                 transport                   default port
==================================================  ==========================  ============
``smtp://host``                                     plain TCP                   25
``smtp+starttls://user:pass@host``                  TCP, then STARTTLS          587
``smtp://user:pass@host?starttls=true``             same as ``smtp+starttls``   587
``smtps://user:pass@host``                          implicit TLS                465
==================================================  ==========================  ============

Query options: ``starttls=true|false`` (only for ``smtp://``) and ``timeout=SECONDS`` (socket timeout for connect
and every reply, > 0). User and password are percent-decoded (``p%40ss`` is ``p@ss``) and must be ASCII. A password
is never shown: ``str()``/``repr()`` of a :class:`SmtpUrl` and every error message use the redacted form
``smtp://user:***@host:port``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from oncebeat.errors import (
    ConfigError,
)
from oncebeat.redact import redact_url, remember_secrets, unencoded_password

__all__ = ["DEFAULT_TIMEOUT", "SmtpUrl", "parse_smtp_url"]

log = logging.getLogger("oncebeat.mail")

#: Default socket timeout in seconds when neither the URL nor the caller sets one.
DEFAULT_TIMEOUT = 10.0

Security = Literal["plain", "starttls", "tls"]

_SCHEMES: dict[str, Security] = {"smtp": "plain", "smtp+starttls": "starttls", "smtps": "tls"}
_CANONICAL_SCHEME: dict[Security, str] = {"plain": "smtp", "starttls": "smtp+starttls", "tls": "smtps"}
_DEFAULT_PORTS: dict[Security, int] = {"plain": 25, "starttls": 587, "tls": 465}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

# scheme://user:PASSWORD@ — the password runs to the last '@' of the token, so
# an unencoded '@' or '/' in a password is still hidden (we prefer hiding too
# much to showing a secret).


def _bad(problem: str) -> ConfigError:
    # Pieces of the URL quoted in a problem (path, port, query) may be pieces of an unencoded password.
    return ConfigError(redact_url(f"SMTP_URL: {problem}"))


@dataclass(frozen=True)
class SmtpUrl:
    """A parsed SMTP server URL (see :func:`parse_smtp_url`).

    Attributes:
        security: ``"plain"``, ``"starttls"`` or ``"tls"`` (implicit TLS).
        host: Host name or IP address (IPv6 without brackets).
        port: TCP port.
        username: Login user, or ``None`` for no ``AUTH``.
        password: Login password (never shown by ``str``/``repr``).
        timeout: Socket timeout in seconds from ``?timeout=``, or ``None`` if
            the URL does not set one.
    """

    security: Security
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float | None = None

    @property
    def scheme(self) -> str:
        """The canonical scheme: ``smtp``, ``smtp+starttls`` or ``smtps``."""
        return _CANONICAL_SCHEME[self.security]

    def redacted(self) -> str:
        """Return the URL with the password replaced by ``***``.

        Returns:
            str: E.g. ``"smtp+starttls://bob:***@mail.example.com:587?timeout=5"``.
        """
        userinfo = ""
        if self.username is not None:
            userinfo = quote(self.username, safe="")
            if self.password is not None:
                userinfo += ":***"
            userinfo += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"?timeout={self.timeout:g}" if self.timeout is not None else ""
        return f"{self.scheme}://{userinfo}{host}:{self.port}{query}"

    def __str__(self) -> str:
        return self.redacted()

    def __repr__(self) -> str:
        return f"SmtpUrl({self.redacted()!r})"


def parse_smtp_url(url: str) -> SmtpUrl:
    """Parse the ``SMTP_URL`` setting.

    Args:
        url: E.g. ``"smtp+starttls://bob:p%40ss@mail.example.com?timeout=5"``.

    Returns:
        SmtpUrl: The parsed URL with defaults applied (port 25/587/465).

    Raises:
        ConfigError: The URL is empty, has an unknown scheme, no host, a bad
            port, a path/fragment, an unknown or invalid query option, a
            password without a user, or a non-ASCII user/password. The message
            starts with ``SMTP_URL:`` and never contains the password.
    """
    if not isinstance(url, str) or not url.strip():
        raise _bad("is empty; expected e.g. smtp://localhost:1025 or smtp+starttls://user:password@mail.example.com")
    text = url.strip()
    remember_secrets(text)
    shown = redact_url(text)
    if "://" not in text:
        raise _bad(f"{shown!r} is not a URL; expected smtp://host[:port], smtp+starttls://... or smtps://...")
    problem = unencoded_password(text)
    if problem:
        raise _bad(f"{shown!r}: {problem}")
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise _bad(f"cannot parse {shown!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise _bad(f"unsupported scheme {scheme!r}; use smtp://, smtp+starttls:// or smtps://")
    security = _SCHEMES[scheme]
    if parts.path not in ("", "/"):
        raise _bad(f"unexpected path {parts.path!r}; an SMTP URL is scheme://[user[:password]@]host[:port][?options]")
    if parts.fragment:
        raise _bad("unexpected '#fragment'")
    host = parts.hostname
    if not host:
        raise _bad("has no host; expected e.g. smtp://mail.example.com:587")
    try:
        explicit_port = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        raise _bad(f"invalid port {port_text!r}; expected a number 1-65535") from None
    if explicit_port == 0:
        raise _bad("invalid port 0; expected a number 1-65535")

    timeout: float | None = None
    try:
        options = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise _bad(f"cannot parse query {parts.query!r}; expected e.g. ?timeout=10&starttls=true") from None
    for key, value in options:
        lkey = key.lower()
        if lkey == "starttls":
            lvalue = value.strip().lower()
            if lvalue in _TRUE:
                if security == "tls":
                    raise _bad("starttls=true cannot be combined with smtps:// (implicit TLS)")
                security = "starttls"
            elif lvalue in _FALSE:
                if security == "starttls":
                    raise _bad("starttls=false contradicts the smtp+starttls:// scheme")
            else:
                raise _bad(f"starttls={value!r} is not a boolean; use starttls=true or starttls=false")
        elif lkey == "timeout":
            try:
                timeout = float(value)
            except ValueError:
                raise _bad(f"timeout={value!r} is not a number of seconds") from None
            if not timeout > 0 or timeout == float("inf"):
                raise _bad(f"timeout={value!r} must be a positive number of seconds")
        else:
            raise _bad(f"unknown option {key!r}; supported options are starttls and timeout")

    username = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    if password is not None and not username:
        raise _bad("has a password but no user name; use scheme://user:password@host")
    if username == "":
        username = None
    for label, part in (("user name", username), ("password", password)):
        if part is not None and not part.isascii():
            raise _bad(f"the {label} must be ASCII (percent-encode special characters)")
    port = explicit_port if explicit_port is not None else _DEFAULT_PORTS[security]
    return SmtpUrl(security=security, host=host, port=port, username=username, password=password, timeout=timeout)


_warned_clear_text: set[str] = set()


def _warn_clear_text_auth(url: SmtpUrl) -> None:
    """Warn once per process and URL when ``AUTH`` would send the password unencrypted (``smtp://user:pass@``)."""
    if url.security != "plain" or url.username is None or url.password is None:
        return
    shown = url.redacted()
    if shown in _warned_clear_text:
        return
    _warned_clear_text.add(shown)
    log.warning("SMTP_URL %s logs in without TLS: the password crosses the network in clear text; use "
                "smtp+starttls:// or smtps://", shown, extra={"event": "mail.clear_text_auth"})


