"""Who may call the HTTP API (``/api/…``): bearer tokens of its own, each with a name and a scope.

``ONCEBEAT_API_TOKENS`` lists them, comma-separated, each ``NAME:SCOPE:TOKEN``::

    ONCEBEAT_API_TOKENS="billing:write:Zq3…(32+ characters), looker:read:8Kd…"

- ``NAME`` says who in the audit trail and scopes idempotency keys (letters, digits, ``_ . -``; unique);
- ``SCOPE`` is ``read`` (GET only) or ``write`` (every method);
- ``TOKEN`` is at least :data:`MIN_TOKEN_LENGTH` characters without spaces or commas, unique, and none of the
  dashboard's or ``/metrics``' tokens (``python -c "import secrets; print(secrets.token_urlsafe(32))"``).

Rules (tests in ``tests/web/test_api_access.py``): every ``/api`` path needs ``Authorization: Bearer <token>``
(compared in constant time against every configured token); the dashboard's session cookie is never accepted
there (a browser sends cookies by itself, so accepting them would open the API to cross-site requests), and an
API token never opens a dashboard page (those read the session cookie only). Without any API token the API
answers 503 naming the variable. Refusals are JSON and carry no data; tokens are never logged or echoed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response

from ..errors import ConfigError

__all__ = ["API_PREFIX", "MIN_TOKEN_LENGTH", "READ", "TOKENS_VARIABLE", "WRITE", "ApiClient", "ApiTokens",
           "api_error", "is_api_path"]

API_PREFIX = "/api"
TOKENS_VARIABLE = "ONCEBEAT_API_TOKENS"
READ = "read"
WRITE = "write"
MIN_TOKEN_LENGTH = 24
READ_METHODS = frozenset({"GET", "HEAD"})
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_FORMAT = f"{TOKENS_VARIABLE} holds NAME:SCOPE:TOKEN entries separated by commas, e.g. billing:write:<token>"


def is_api_path(path: str) -> bool:
    """True for ``/api`` and every path under it."""
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def api_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None,
              **more: object) -> Response:
    """The API's error answer: ``{"error": {"type", "message", …more}}`` with ``status``."""
    return JSONResponse({"error": {"type": kind, "message": message, **more}}, status_code=status, headers=headers)


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiClient:
    """An authenticated API caller: the token's ``name`` and ``scope`` (never the token)."""

    name: str
    scope: str

    @property
    def may_write(self) -> bool:
        return self.scope == WRITE


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class ApiTokens:
    """The configured API tokens and the check of each ``/api`` request.

    Args:
        spec: the value of :data:`TOKENS_VARIABLE` (None or blank: the API is off, every request 503).
        other_tokens: the dashboard's and ``/metrics``' tokens, which no API token may equal.
    Raises:
        ConfigError: a malformed entry (named by its position and name, never by its token), a repeated name or
            token, a short token, or a token shared with the dashboard.
    """

    def __init__(self, spec: str | None, other_tokens: Iterable[str | None] = ()) -> None:
        self._tokens: list[tuple[bytes, ApiClient]] = []
        others = {t for t in other_tokens if t}
        names: set[str] = set()
        for n, entry in enumerate((e.strip() for e in (spec or "").split(",")), start=1):
            if not entry:
                continue
            name, _, rest = entry.partition(":")
            scope, _, token = rest.partition(":")
            # The entry's number only, never a piece of it: an entry written in the wrong order (the token first,
            # or the token alone) would put the token where the name belongs.
            where = f"{TOKENS_VARIABLE} entry {n}"
            if not _NAME.fullmatch(name):
                raise ConfigError(f"{where}: the name must be 1 to 64 letters, digits, '_', '.' or '-'; {_FORMAT}")
            if scope not in (READ, WRITE):
                raise ConfigError(f"{where}: the scope must be read or write; {_FORMAT}")
            if len(token) < MIN_TOKEN_LENGTH or any(ch.isspace() for ch in token):
                raise ConfigError(f"{where}: the token must be at least {MIN_TOKEN_LENGTH} characters without spaces; "
                                  "make one with: python -c \"import secrets; print(secrets.token_urlsafe(32))\"")
            if name in names:
                raise ConfigError(f"{where}: the name is given twice; each token needs a name of its own")
            if token in others:
                raise ConfigError(f"{where}: the token is also a dashboard or /metrics token; give the API tokens "
                                  "of their own")
            digest = _digest(token)
            if any(hmac.compare_digest(digest, known) for known, _ in self._tokens):
                raise ConfigError(f"{where}: the token is given twice; each name needs a token of its own")
            names.add(name)
            self._tokens.append((digest, ApiClient(name=name, scope=scope)))

    @property
    def configured(self) -> bool:
        """True when at least one API token is set."""
        return bool(self._tokens)

    def names(self) -> list[str]:
        """``name (scope)`` of every token, for the start-up line."""
        return [f"{c.name} ({c.scope})" for _, c in self._tokens]

    def client(self, conn: HTTPConnection) -> ApiClient | None:
        """The client whose token the request's ``Authorization: Bearer`` header carries, else None.

        Every configured token is compared (SHA-256 digests through ``hmac.compare_digest``) whichever matches,
        so the time taken says nothing about which token or how much of it was right. Cookies are never read.
        """
        scheme, _, given = conn.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        guess = _digest(given.strip())
        found = None
        for digest, client in self._tokens:
            if hmac.compare_digest(guess, digest):
                found = found or client
        return found

    def refusal(self, conn: HTTPConnection, method: str) -> tuple[ApiClient | None, Response | None]:
        """``(client, None)`` when the request may go on, else ``(None, the JSON answer to send)``."""
        if not self.configured:
            return None, api_error(503, "api_off", f"the HTTP API is off: set {TOKENS_VARIABLE} "
                                   "(NAME:read|write:TOKEN, comma-separated) in the environment of oncebeat web and "
                                   "restart it")
        client = self.client(conn)
        if client is None:
            missing = not conn.headers.get("authorization")
            why = ("send Authorization: Bearer <token> (a token of ONCEBEAT_API_TOKENS; the dashboard's login "
                   "does not open the API)") if missing else "the bearer token is not one of ONCEBEAT_API_TOKENS"
            challenge = 'Bearer realm="oncebeat api"' + ("" if missing else ', error="invalid_token"')
            return None, api_error(401, "unauthorized", why, {"www-authenticate": challenge})
        if method.upper() not in READ_METHODS and not client.may_write:
            return None, api_error(403, "forbidden", f"token {client.name!r} has the read scope: writes need a "
                                   "token with the write scope")
        return client, None

