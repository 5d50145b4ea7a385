"""Security of the dashboard: headers, the operator token, sessions and CSRF.

Rules (each has a test in ``tests/web/test_security.py``):

- Every response carries a Content-Security-Policy without inline script (the
  dashboard has no script at all), ``frame-ancestors 'none'``, ``nosniff``,
  ``Referrer-Policy: same-origin`` and ``Cache-Control: no-store``.
- Every POST needs a CSRF check: a random cookie (``HttpOnly``,
  ``SameSite=Strict``) and a form field carrying its HMAC (the "signed double
  submit" pattern), and no cross-site ``Origin`` / ``Sec-Fetch-Site``.
- Every action (a POST that changes something) also needs an operator session.
  A session is obtained by posting ``ONCEBEAT_WEB_TOKEN`` to ``/login``; the
  token is compared in constant time and never travels in a URL. The session
  cookie is ``<issued>.<nonce>.<hmac>`` keyed by the token, so changing the
  token ends every session. Without a token configured the dashboard is
  read-only: there is no way to log in and every action answers 403.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "ActionRefused",
    "Guard",
    "SecurityHeaders",
    "content_security_policy",
]

CSRF_COOKIE = "oncebeat_csrf"
SESSION_COOKIE = "oncebeat_session"
CSRF_FIELD = "csrf"
SESSION_SECONDS = 12 * 3600

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def content_security_policy(*, sandbox: bool = False) -> str:
    """The CSP of every page: no script at all, styles and images from this origin only, no framing.

    ``sandbox`` adds the ``sandbox`` directive (used for rendered email previews, which are customer data).
    """
    policy = ("default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self' data:; "
              "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    return policy + ("; sandbox" if sandbox else "")


_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # No URL leaks to other sites; "no-referrer" would make Chromium send "Origin: null" on our own forms.
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=()",
}


class SecurityHeaders:
    """ASGI middleware adding the security headers to every HTTP response (a page may set a stricter CSP)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.decode("latin-1").lower() for k, _ in headers}
                extra = dict(_HEADERS)
                extra["content-security-policy"] = content_security_policy()
                if "cache-control" not in present:
                    extra["cache-control"] = "no-store"
                headers += [(k.encode(), v.encode()) for k, v in extra.items() if k not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class ActionRefused(Exception):
    """A POST failed the CSRF or token check. ``status`` is 403; ``reason`` is shown to the operator."""

    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(slots=True)
class Guard:
    """Checks POSTs: CSRF for all of them, the operator session for actions.

    Args:
        token: ``ONCEBEAT_WEB_TOKEN``; None or empty makes the dashboard read-only.
        secure_cookies: mark cookies ``Secure`` (when served over HTTPS).
    """

    token: str | None
    secure_cookies: bool = False
    _csrf_key: bytes = field(default=b"", init=False, repr=False)
    _session_key: bytes = field(default=b"", init=False, repr=False)

    def __post_init__(self) -> None:
        self.token = self.token or None
        # CSRF tokens need a key even when read-only (the reminder search is a POST); a per-process random
        # key is enough, since a restart only invalidates forms already on screen.
        self._csrf_key = secrets.token_bytes(32)
        self._session_key = (hashlib.sha256(b"oncebeat-web-session\0" + self.token.encode()).digest()
                             if self.token else b"")

    @property
    def read_only(self) -> bool:
        """True when no token is configured: nothing can change through the dashboard."""
        return self.token is None

    # --- CSRF ----------------------------------------------------------------------------------
    def csrf_cookie(self, request: Request) -> tuple[str, bool]:
        """The request's CSRF cookie value, or a new one; the flag says whether it must be set."""
        value = request.cookies.get(CSRF_COOKIE, "")
        if len(value) == 43 and value.replace("-", "").replace("_", "").isalnum():
            return value, False
        return secrets.token_urlsafe(32), True

    def csrf_field(self, cookie_value: str) -> str:
        """The form field value that proves a form came from this dashboard for that cookie."""
        return hmac.new(self._csrf_key, cookie_value.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, request: Request, form_value: str | None) -> None:
        """Raises ActionRefused unless the request is same-origin and carries a valid CSRF field."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise ActionRefused(f"cross-site request refused (Sec-Fetch-Site: {site})")
        origin = request.headers.get("origin")
        if origin is not None and origin != "null":
            own = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if origin.rstrip("/") != own:
                raise ActionRefused("cross-origin request refused (Origin does not match this dashboard)")
        elif origin == "null":
            raise ActionRefused("request from an opaque origin refused")
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie or not form_value or not hmac.compare_digest(self.csrf_field(cookie), form_value):
            raise ActionRefused("the form's CSRF check failed: reload the page and try again")

    # --- operator token and session --------------------------------------------------------------
    def token_matches(self, given: str) -> bool:
        """Constant-time comparison of ``given`` with the configured token (False when read-only)."""
        if self.token is None:
            return False
        # Compare digests so the comparison takes the same time whatever the lengths are.
        return hmac.compare_digest(hashlib.sha256(given.encode()).digest(),
                                   hashlib.sha256(self.token.encode()).digest())

    def new_session(self, now: float | None = None) -> str:
        """A session cookie value ``<issued>.<nonce>.<mac>`` (requires a token)."""
        if self.token is None:
            raise ActionRefused("read-only dashboard: ONCEBEAT_WEB_TOKEN is not set")
        body = f"{int(now if now is not None else time.time())}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._mac(body)}"

    def _mac(self, body: str) -> str:
        return hmac.new(self._session_key, body.encode(), hashlib.sha256).hexdigest()

    def has_session(self, request: Request, now: float | None = None) -> bool:
        """True when the request carries an unexpired session cookie made with the current token."""
        if self.token is None:
            return False
        value = request.cookies.get(SESSION_COOKIE, "")
        body, _, mac = value.rpartition(".")
        issued, _, _nonce = body.partition(".")
        if not body or not issued.isdigit() or not hmac.compare_digest(self._mac(body), mac):
            return False
        age = (now if now is not None else time.time()) - int(issued)
        return 0 <= age <= SESSION_SECONDS

    def check_action(self, request: Request, form_value: str | None) -> None:
        """CSRF plus operator session; raises ActionRefused naming what is missing."""
        self.check_csrf(request, form_value)
        if self.token is None:
            raise ActionRefused("read-only dashboard: set ONCEBEAT_WEB_TOKEN on the server to allow actions")
        if not self.has_session(request):
            raise ActionRefused("actions need the operator token: log in first", status=401)

    def cookie_options(self) -> dict[str, Any]:
        """Attributes of every cookie the dashboard sets."""
        return {"httponly": True, "samesite": "strict", "secure": self.secure_cookies, "path": "/"}


def same_site_path(target: str | None, default: str = "/") -> str:
    """``target`` if it is a local path (``/jobs?state=running``), else ``default`` (no open redirect)."""
    if not target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target
