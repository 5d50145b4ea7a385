"""Security of the dashboard: who may see what, headers, sessions, CSRF, the Host check and the login throttle.

Rules (each has a test in ``tests/web/test_security.py`` or ``tests/web/test_access.py``):

- Every page needs a session. A session is obtained by posting a token to ``/login``:
  ``ONCEBEAT_WEB_TOKEN`` gives the ``admin`` role (every page and every action),
  ``ONCEBEAT_WEB_VIEWER_TOKEN`` the ``viewer`` role (every page, no action). Tokens are
  compared in constant time and never travel in a URL. The session cookie is
  ``<role>.<issued>.<nonce>.<hmac>`` keyed by that role's token, so changing a token ends
  its sessions. Anonymous requests get a redirect to ``/login`` (GET) or 401, never data.
  Only ``/login``, ``/static/…``, ``/webhooks/stripe`` (Stripe's signature) and ``/metrics``
  (its own bearer token ``ONCEBEAT_METRICS_TOKEN``, else loopback clients only) are exempt.
  Without any token configured every page says how to set one (503).
- The ``Host`` header must be an allowed name (loopback names by default), so a
  DNS-rebinding page cannot read the dashboard through the operator's browser.
- ``/login`` is throttled per client address (:class:`LoginThrottle`).
- Every response carries a Content-Security-Policy without inline script or style
  (the only script is the vendored htmx file, whose eval and inline styles are off),
  ``frame-ancestors 'none'``, ``nosniff``, ``Referrer-Policy: same-origin`` and ``Cache-Control: no-store``.
- Every POST needs a CSRF check: a random cookie (``HttpOnly``,
  ``SameSite=Strict``) and a form field carrying its HMAC (the "signed double
  submit" pattern), and no cross-site ``Origin`` / ``Sec-Fetch-Site``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..errors import ConfigError
from .api_auth import ApiTokens, api_error, is_api_path

__all__ = [
    "ADMIN",
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "LOOPBACK_HOSTS",
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "VIEWER",
    "ActionRefused",
    "BodyLimit",
    "Gate",
    "Guard",
    "LoginThrottle",
    "MAX_API_BYTES",
    "SecurityHeaders",
    "allowed_hosts",
    "content_security_policy",
    "is_loopback",
]

CSRF_COOKIE = "oncebeat_csrf"
SESSION_COOKIE = "oncebeat_session"
CSRF_FIELD = "csrf"
SESSION_SECONDS = 12 * 3600
ADMIN = "admin"
VIEWER = "viewer"
ROLES = (ADMIN, VIEWER)
# Host header names accepted by default (compared without the port; an IPv6 literal keeps its brackets).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Paths any client may reach without a session: each authenticates in its own way or shows nothing private.
ANONYMOUS_PATHS = frozenset({"/login", "/webhooks/stripe"})
ANONYMOUS_PREFIXES = ("/static/",)
METRICS_PATH = "/metrics"
# Request bodies past this are refused (413) before they are read whole: the dashboard's forms are a few hundred
# bytes. The Stripe webhook counts its own bytes (1 MiB, answered in JSON) and is left to it.
MAX_FORM_BYTES = 64 * 1024
OWN_BODY_LIMIT_PATHS = frozenset({"/webhooks/stripe"})
# The HTTP API's batch writes (up to 1000 invoices) are larger than a form: 1 MiB, answered 413 in JSON.
MAX_API_BYTES = 1024 * 1024
# POSTs a viewer may make: they read (the search is a POST only to keep addresses out of URLs), end a session or
# pick the zone pages show times in or pause the live refresh (preference cookies).
VIEWER_POSTS = frozenset({"/login", "/logout", "/reminders/search", "/zone", "/live"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def content_security_policy(*, sandbox: bool = False) -> str:
    """The CSP of every page: no inline script or style (scripts, styles, images and the live regions' requests
    from this origin only: htmx and its partials), no framing.

    ``sandbox`` adds the ``sandbox`` directive (used for rendered email previews, which are customer data).
    """
    policy = ("default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self' data:; "
              "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    return policy + ("; sandbox" if sandbox else "")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``, bracketed or not)."""
    name = host.strip().lower().removeprefix("[").removesuffix("]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(extra: Iterable[str] = ()) -> list[str]:
    """The Host names the dashboard answers: :data:`LOOPBACK_HOSTS` plus ``extra`` (lower-cased, port dropped).

    ``extra`` entries are names (``dash.example.com``), ``*.example.com`` wildcards or IP literals; an IPv6
    literal is given with or without brackets.

    Raises:
        ConfigError: an entry that is empty, holds a scheme, a path or a misplaced ``*``.
    """
    hosts = list(LOOPBACK_HOSTS)
    for raw in extra:
        name = raw.strip().lower()
        if not name:
            continue
        if "/" in name or "*" in name[1:] or (name.startswith("*") and not name.startswith("*.")) or " " in name:
            raise ConfigError(f"allowed host {raw.strip()!r} (--allowed-host, ONCEBEAT_WEB_ALLOWED_HOSTS) is not a "
                              "host name: give a bare name such as dash.example.com or *.example.com (no scheme, "
                              "no path)")
        try:
            if ipaddress.ip_address(name.strip("[]")).version == 6:
                name = f"[{name.strip('[]')}]"
        except ValueError:
            name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name  # drop a port given by mistake
        if name not in hosts:
            hosts.append(name)
    return hosts


def _host_name(header: str) -> str:
    """The name part of a Host header: ``[::1]:8000`` → ``[::1]``, ``localhost:8000`` → ``localhost``."""
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


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


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@dataclass(slots=True)
class Guard:
    """Sessions and roles, CSRF for every POST, the admin role for actions, the ``/metrics`` check.

    Args:
        token: ``ONCEBEAT_WEB_TOKEN`` (role ``admin``); None or empty: nobody can act.
        secure_cookies: mark cookies ``Secure`` (when served over HTTPS).
        viewer_token: ``ONCEBEAT_WEB_VIEWER_TOKEN`` (role ``viewer``: pages, no action); None: no viewer role.
        metrics_token: ``ONCEBEAT_METRICS_TOKEN``: ``/metrics`` needs ``Authorization: Bearer <it>``;
            None: ``/metrics`` answers loopback clients only.
    Raises:
        ConfigError: the viewer token equals the admin token (a login could not tell the roles apart).
    """

    token: str | None
    secure_cookies: bool = False
    viewer_token: str | None = None
    metrics_token: str | None = None
    _csrf_key: bytes = field(default=b"", init=False, repr=False)
    _session_keys: dict[str, bytes] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.token = self.token or None
        self.viewer_token = self.viewer_token or None
        self.metrics_token = self.metrics_token or None
        if self.token is not None and self.token == self.viewer_token:
            raise ConfigError("ONCEBEAT_WEB_VIEWER_TOKEN equals ONCEBEAT_WEB_TOKEN: give the read-only role a "
                              "token of its own")
        # CSRF tokens need a key whatever the configuration; a per-process random key is enough, since a
        # restart only invalidates forms already on screen.
        self._csrf_key = secrets.token_bytes(32)
        for role, secret in self._tokens():
            self._session_keys[role] = _digest(f"oncebeat-web-session\0{role}\0{secret}")

    def _tokens(self) -> list[tuple[str, str]]:
        return [(role, t) for role, t in ((ADMIN, self.token), (VIEWER, self.viewer_token)) if t is not None]

    @property
    def configured(self) -> bool:
        """True when someone can log in (an admin or a viewer token is set)."""
        return bool(self._session_keys)

    @property
    def read_only(self) -> bool:
        """True when no admin token is configured: nothing can change through the dashboard."""
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

    # --- tokens, sessions and roles ------------------------------------------------------------------
    def login_role(self, given: str) -> str | None:
        """The role whose token ``given`` is (``admin``, ``viewer``), else None; constant time.

        Every configured token is compared (digests of equal length through ``hmac.compare_digest``),
        whichever matches, so the time taken says nothing about the tokens.
        """
        found = None
        guess = _digest(given)
        for role, secret in self._tokens():
            if hmac.compare_digest(guess, _digest(secret)):
                found = found or role
        return found

    def token_matches(self, given: str) -> bool:
        """True when ``given`` is the admin token (constant time; False when none is configured)."""
        return self.login_role(given) == ADMIN

    def new_session(self, role: str = ADMIN, now: float | None = None) -> str:
        """A session cookie value ``<role>.<issued>.<nonce>.<mac>`` (the role's token must be configured)."""
        if role not in self._session_keys:
            raise ActionRefused(f"no {role} token is configured on the server")
        body = f"{role}.{int(now if now is not None else time.time())}.{secrets.token_urlsafe(16)}"
        return f"{body}.{self._mac(role, body)}"

    def _mac(self, role: str, body: str) -> str:
        return hmac.new(self._session_keys[role], body.encode(), hashlib.sha256).hexdigest()

    def session_role(self, conn: HTTPConnection, now: float | None = None) -> str | None:
        """The role of the request's session cookie, if it is unexpired and made with that role's current token."""
        value = conn.cookies.get(SESSION_COOKIE, "")
        if len(value) > 200:
            return None
        body, _, mac = value.rpartition(".")
        role, _, rest = body.partition(".")
        issued, _, _nonce = rest.partition(".")
        if role not in self._session_keys or not (issued.isascii() and issued.isdigit()) or len(issued) > 12:
            return None
        if not hmac.compare_digest(self._mac(role, body), mac):
            return None
        age = (now if now is not None else time.time()) - int(issued)
        return role if 0 <= age <= SESSION_SECONDS else None

    def has_session(self, request: HTTPConnection, now: float | None = None) -> bool:
        """True when the request carries a valid session of any role."""
        return self.session_role(request, now) is not None

    def check_action(self, request: Request, form_value: str | None) -> None:
        """CSRF plus an admin session; raises ActionRefused naming what is missing."""
        self.check_csrf(request, form_value)
        if self.token is None:
            raise ActionRefused("read-only dashboard: set ONCEBEAT_WEB_TOKEN on the server to allow actions")
        role = self.session_role(request)
        if role is None:
            raise ActionRefused("actions need the operator token: log in first", status=401)
        if role != ADMIN:
            raise ActionRefused(f"read-only: you are logged in as {role}; log in with ONCEBEAT_WEB_TOKEN for actions")

    def metrics_allowed(self, conn: HTTPConnection) -> tuple[bool, str]:
        """Whether ``conn`` may read ``/metrics``, and if not, why (shown in the 401/403 answer).

        With a metrics token: ``Authorization: Bearer <token>`` (constant time). Without: the peer address
        (not a header) must be loopback and the Host a loopback name (a proxy on this host that forwards a
        public name is not a loopback client).
        """
        if self.metrics_token is not None:
            scheme, _, given = conn.headers.get("authorization", "").partition(" ")
            ok = scheme.lower() == "bearer" and hmac.compare_digest(_digest(given.strip()),
                                                                    _digest(self.metrics_token))
            return ok, "send Authorization: Bearer with ONCEBEAT_METRICS_TOKEN"
        peer = conn.client.host if conn.client else ""
        ok = is_loopback(peer) and is_loopback(_host_name(conn.headers.get("host", "")))
        return ok, "/metrics answers loopback clients only: set ONCEBEAT_METRICS_TOKEN to scrape from elsewhere"

    def cookie_options(self) -> dict[str, Any]:
        """Attributes of every cookie the dashboard sets."""
        return {"httponly": True, "samesite": "strict", "secure": self.secure_cookies, "path": "/"}


@dataclass(slots=True)
class LoginThrottle:
    """Failed logins per client: after ``max_failures`` within ``window`` seconds, ``/login`` answers 429.

    Clients are keyed by address (an IPv6 address by its /64, which one host usually holds whole). The
    table keeps at most ``max_clients`` entries (least recently failed dropped first), so memory is bounded
    whatever the number of addresses. A successful login clears its client's entry. While a client is
    blocked even the right token is refused, so guessing gains nothing from the block.
    """

    max_failures: int = 10
    window: float = 900.0
    max_clients: int = 4096
    now: Callable[[], float] = time.monotonic
    _failures: OrderedDict[str, tuple[float, int]] = field(default_factory=OrderedDict, init=False, repr=False)

    @staticmethod
    def key(address: str | None) -> str:
        """The table key of a client address (IPv6 → its /64 network)."""
        if not address:
            return "?"
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address[:64]
        if ip.version == 6:
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip)

    def retry_after(self, address: str | None) -> int | None:
        """Seconds until ``address`` may try again, or None when it may try now."""
        key = self.key(address)
        entry = self._failures.get(key)
        if entry is None:
            return None
        started, count = entry
        left = started + self.window - self.now()
        if left <= 0:
            del self._failures[key]
            return None
        return math.ceil(left) if count >= self.max_failures else None

    def failed(self, address: str | None) -> None:
        """Count a failed login of ``address`` (a new window starts with its first failure)."""
        key = self.key(address)
        started, count = self._failures.pop(key, (self.now(), 0))
        if started + self.window <= self.now():
            started, count = self.now(), 0
        self._failures[key] = (started, count + 1)
        while len(self._failures) > self.max_clients:
            self._failures.popitem(last=False)

    def succeeded(self, address: str | None) -> None:
        """Forget the failures of ``address``."""
        self._failures.pop(self.key(address), None)

    def __len__(self) -> int:
        return len(self._failures)


_PLAIN_PAGE = ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title} · oncebeat</title>'
               '<link rel="stylesheet" href="/static/style.css"></head><body><main><h1>{title}</h1>'
               '<p class="error" role="alert">{reason}</p></main></body></html>')


def _plain(title: str, reason: str, status: int, headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(_PLAIN_PAGE.format(title=escape(title), reason=escape(reason)), status_code=status,
                        headers=headers)


class _BodyTooLarge(Exception):
    """Raised inside ``receive`` by :class:`BodyLimit` when a body passes its limit (caught by the middleware)."""


class BodyLimit:
    """ASGI middleware: a request body past ``max_bytes`` answers 413 and is not read further.

    Bytes are counted as the application receives them, so a chunked body or a lying ``Content-Length``
    cannot make a form parser hold more than ``max_bytes`` (Starlette's own form limits are per field:
    1000 fields of 1 MB each). Paths in ``exempt`` count their own bytes. The 413 closes the connection.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_FORM_BYTES,
                 exempt: frozenset[str] = OWN_BODY_LIMIT_PATHS, api_bytes: int = MAX_API_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.exempt = exempt
        self.api_bytes = api_bytes

    def _too_large(self, path: str, limit: int) -> Response:
        if is_api_path(path):
            return api_error(413, "too_large", f"the request body is larger than {limit} bytes: send fewer items "
                             "per request", {"connection": "close"}, limit=limit)
        return _plain("Too large", f"the request body is larger than {limit} bytes", 413, {"connection": "close"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        path = str(scope["path"])
        limit = self.api_bytes if is_api_path(path) else self.max_bytes
        declared = HTTPConnection(scope).headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
            await self._too_large(path, limit)(scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if started:  # an answer is on its way already: nothing else can be said on this connection
                raise
            await self._too_large(path, limit)(scope, receive, send)


class Gate:
    """ASGI middleware: no page without a session, no action without the admin role, ``/metrics`` by its rule.

    Every path not listed as anonymous needs a session, so a route added later is private by default.
    Anonymous GETs are redirected to ``/login?next=…``; other anonymous requests get 401. Paths under ``/api``
    take the API's bearer tokens instead, and only them (:class:`~oncebeat.web.api_auth.ApiTokens`). A viewer's POST
    is refused (403) unless it only reads (:data:`VIEWER_POSTS`). Without any token configured every page
    answers 503 naming ``ONCEBEAT_WEB_TOKEN``. The responses of this middleware carry no data.
    """

    def __init__(self, app: ASGIApp, guard: Guard, api: ApiTokens | None = None) -> None:
        self.app = app
        self.guard = guard
        self.api = api or ApiTokens(None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        if is_api_path(conn.url.path):
            # The API's own bearer tokens, never the session cookie (see oncebeat.web.api_auth).
            client, refusal = self.api.refusal(conn, str(scope.get("method", "GET")))
            if client is not None:
                scope.setdefault("state", {})["api_client"] = client
        else:
            refusal = self.refusal(conn, str(scope.get("method", "GET")))
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await refusal(scope, receive, send)

    def refusal(self, conn: HTTPConnection, method: str) -> Response | None:
        """The answer to send instead of the page, or None when the request may go on."""
        path = conn.url.path
        if path in ANONYMOUS_PATHS or path.startswith(ANONYMOUS_PREFIXES):
            return None
        if path == METRICS_PATH:
            ok, why = self.guard.metrics_allowed(conn)
            if ok:
                return None
            if self.guard.metrics_token is not None:
                return _plain("Not authorised", why, 401, {"www-authenticate": 'Bearer realm="oncebeat metrics"'})
            return _plain("Refused", why, 403)
        if not self.guard.configured:
            return _plain("Dashboard not configured", "No token is set on the server: set ONCEBEAT_WEB_TOKEN "
                          "(all actions) and optionally ONCEBEAT_WEB_VIEWER_TOKEN (read-only) in the environment "
                          "of oncebeat web, restart it, then log in.", 503)
        role = self.guard.session_role(conn)
        if role is None:
            if method in ("GET", "HEAD"):
                target = path + (f"?{conn.url.query}" if conn.url.query else "")
                login = "/login?next=" + quote(target, safe="")
                if conn.headers.get("hx-request") == "true":
                    # A live region's refresh after the session ended: no page to swap in, the browser goes to
                    # the login page (htmx follows HX-Redirect) and comes back to the page, not to its part.
                    page = path + "?" + urlencode([(k, v) for k, v in conn.query_params.multi_items() if k != "part"])
                    return _plain("Log in first", "This dashboard needs a session: log in at /login.", 401,
                                  {"hx-redirect": "/login?next=" + quote(page.rstrip("?"), safe="")})
                return RedirectResponse(login, status_code=303)
            return _plain("Log in first", "This dashboard needs a session: log in at /login.", 401)
        if role != ADMIN and method not in ("GET", "HEAD") and path not in VIEWER_POSTS:
            return _plain("Refused", f"read-only: you are logged in as {role}; log in with ONCEBEAT_WEB_TOKEN "
                          "for actions", 403)
        return None


def same_site_path(target: str | None, default: str = "/") -> str:
    """``target`` if it is a local path (``/jobs?state=running``), else ``default`` (no open redirect)."""
    if not target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target
