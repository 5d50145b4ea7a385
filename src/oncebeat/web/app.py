"""The Starlette application behind ``oncebeat web``: pages, actions, ``/metrics`` and webhooks.

The web layer only parses requests, calls the library's read and admin verbs
and renders templates: it holds no SQL and no business rule. Pages are
server-rendered and work without JavaScript; charts are inline SVG. The only script is htmx (vendored, 0BSD),
which refreshes a page's live regions (its numbers) from server-rendered partials until the operator pauses it.

Routes are collected from the page modules (each exposes ``routes``). Modules that other
features add are mounted when they are importable: ``oncebeat.web.webhooks.routes`` (payment
provider webhooks, which authenticate themselves with their provider's signature and so are
exempt from the operator token and the CSRF form field).

Example::

    from oncebeat.web import WebSettings, create_app
    app = create_app(WebSettings(database_url="sqlite:///oncebeat.db", token="s3cret"))
    # uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..errors import OncebeatError
from ..metrics import install_instruments
from ..reminders.runtime import Runtime, load_runtime
from ..timebase import Clock
from . import filters
from .api_auth import ApiTokens, api_error, is_api_path
from .security import (
    ADMIN,
    CSRF_COOKIE,
    CSRF_FIELD,
    ActionRefused,
    BodyLimit,
    Gate,
    Guard,
    LoginThrottle,
    SecurityHeaders,
    allowed_hosts,
    same_site_path,
)

__all__ = ["LIVE_COOKIE", "MAX_ID_DIGITS", "ZONE_COOKIE", "Banner", "Dashboard", "WebSettings", "action_form",
           "create_app", "dashboard", "parse_id", "redirect_with", "register_banner", "render"]

log = logging.getLogger("oncebeat.web")
HERE = Path(__file__).parent
FLASH_COOKIE = "oncebeat_flash"
#: The operator's choice of zone for instants on every page: "schedule" (the [schedule] zone), else UTC.
ZONE_COOKIE = "oncebeat_zone"
PAGE_MODULES = ("overview", "schedules", "jobs", "queues", "effects", "reminders", "policies", "reports", "doctor",
                "auth", "metrics_route", "api", "api_reads", "api_holds", "api_reports", "api_queues", "api_ladders",
                "tasks", "evidence")
OPTIONAL_MODULES = ("webhooks",)


MAX_ID_DIGITS = 18  # every id fits a signed 64-bit integer (SQLite INTEGER, PostgreSQL BIGINT)


class IdConvertor(Convertor[int]):
    """``{id:id}`` in a route: 1 to 18 digits, so a longer number matches no route (404) instead of
    overflowing the database's integer (a 500)."""

    regex = f"[0-9]{{1,{MAX_ID_DIGITS}}}"

    def convert(self, value: str) -> int:
        return int(value)

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("id", IdConvertor())


def parse_id(text: str | None, what: str) -> int | None:
    """A whole-number id from a query parameter; None when empty.

    Raises:
        OncebeatError: not 1 to 18 digits (answered 400 with the message).
    """
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > MAX_ID_DIGITS:
        raise OncebeatError(f"{what}: {text[:40]!r} is not an id (a whole number of at most {MAX_ID_DIGITS} digits)")
    return int(text)


@dataclass(kw_only=True, slots=True)
class WebSettings:
    """What ``oncebeat web`` was started with.

    Attributes:
        database_url: the store URL (default ``DATABASE_URL``, else ``sqlite:///oncebeat.db``).
        config: the policy file (reminder app), default ``ONCEBEAT_CONFIG`` / ``./oncebeat.toml``.
        app: ``module:attribute`` of a library user's App, else the reminder app.
        token: ``ONCEBEAT_WEB_TOKEN``, the ``admin`` role's login (pages and actions).
        viewer_token: ``ONCEBEAT_WEB_VIEWER_TOKEN``, the ``viewer`` role's login (pages, no action).
            With neither token, every page only says how to set one.
        metrics_token: ``ONCEBEAT_METRICS_TOKEN``; None serves ``/metrics`` to loopback clients only.
        api_tokens: ``ONCEBEAT_API_TOKENS``, the HTTP API's bearer tokens (``NAME:read|write:TOKEN``, comma-separated;
            :mod:`oncebeat.web.api_auth`); None: ``/api`` answers 503.
        allowed_hosts: Host names answered besides the loopback names (``--allowed-host``,
            ``ONCEBEAT_WEB_ALLOWED_HOSTS``); ``*.example.com`` matches subdomains.
        secure_cookies: set ``Secure`` on cookies (serve over HTTPS, e.g. behind a TLS proxy).
        clock: time source (tests inject a simulated clock).
    """

    database_url: str | None = None
    config: Path | None = None
    app: str | None = None
    token: str | None = None
    viewer_token: str | None = None
    metrics_token: str | None = None
    api_tokens: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    secure_cookies: bool = False
    clock: Clock | None = None
    migrate: bool = True


@dataclass(kw_only=True, slots=True)
class Dashboard:
    """Everything a request handler needs: the runtime (store, app, policy, clock), the guard, templates."""

    runtime: Runtime
    guard: Guard
    templates: Jinja2Templates
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    cache: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Banner:
    """A notice shown at the top of every page while its condition lasts: ``title`` (bold), ``text`` and a
    ``link`` to the page that tells more (None: no link)."""

    title: str
    text: str
    link: str | None = None


#: Who may put a banner on every page: each is called with the runtime at every page render and returns its
#: banners (usually none). An app's part of the dashboard registers its own (the reminder app: a mail outage),
#: so the engine's pages need not know the app.
BANNER_SOURCES: list[Callable[[Runtime], list[Banner]]] = []


def register_banner(source: Callable[[Runtime], list[Banner]]) -> None:
    """Show ``source``'s banners on every page (idempotent; see :data:`BANNER_SOURCES`)."""
    if source not in BANNER_SOURCES:
        BANNER_SOURCES.append(source)


def _banners(request: Request, role: str | None) -> list[Banner]:
    if role is None:  # nothing about the system before a login
        return []
    rt = dashboard(request).runtime
    return [b for source in BANNER_SOURCES for b in source(rt)]


#: Live refresh: the page's numbers (each region a template block named ``live_<part>``) are fetched again every
#: :data:`LIVE_SECONDS` by htmx (``/static/vendor/htmx.min.js``) from the same URL with ``?part=<part>``, which the
#: server renders alone (:func:`render`). The operator's pause is remembered in :data:`LIVE_COOKIE` (``off``).
LIVE_COOKIE = "oncebeat_live"
LIVE_SECONDS = 10
PART_PARAM = "part"


def _live(request: Request, logged_in: bool) -> int | None:
    """The refresh period of the page's live regions, None when paused, not logged in, or a POST's answer."""
    if not logged_in or request.method != "GET" or request.cookies.get(LIVE_COOKIE) == "off":
        return None
    return LIVE_SECONDS


def _live_attrs(request: Request, live: int | None) -> Callable[[str], Markup]:
    """``live_attrs("queues")`` in a template: the htmx attributes that refresh the region (none when paused)."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in (PART_PARAM, "refresh")]

    def attrs(part: str) -> Markup:
        if live is None:
            return Markup("")
        url = request.url.path + "?" + urlencode([*kept, (PART_PARAM, part)])
        return Markup('hx-get="{}" hx-trigger="every {}s" hx-swap="innerHTML"').format(url, live)

    return attrs


def _block(env: Environment, template: str, part: str) -> Any:
    """The render function of block ``live_<part>`` of ``template`` or of the base it extends (None: no such)."""
    name = f"live_{part}"
    for tmpl in (env.get_template(template), env.get_template("base.html")):
        if name in tmpl.blocks:
            return tmpl, tmpl.blocks[name]
    return None


def _parts(env: Environment, template: str) -> list[str]:
    names = {*env.get_template(template).blocks, *env.get_template("base.html").blocks}
    return sorted(n.removeprefix("live_") for n in names if n.startswith("live_"))


def dashboard(request: Request) -> Dashboard:
    """The :class:`Dashboard` of the application serving ``request``."""
    return request.app.state.dashboard  # type: ignore[no-any-return]


def _templates() -> Jinja2Templates:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    filters.install(env)
    return Jinja2Templates(env=env)


def render(request: Request, template: str, context: dict[str, Any] | None = None, *, status: int = 200) -> Response:
    """Render ``template`` with the page chrome: CSRF field, role, read-only flag and the flash message."""
    d = dashboard(request)
    csrf_cookie, new_cookie = d.guard.csrf_cookie(request)
    flash = unquote(request.cookies.get(FLASH_COOKIE, ""))[:500]
    role = d.guard.session_role(request)
    live = _live(request, role is not None)
    ctx = {
        "live": live,
        "live_paused": request.cookies.get(LIVE_COOKIE) == "off",
        "live_attrs": _live_attrs(request, live),
        "request": request,
        "csrf_field": CSRF_FIELD,
        "csrf_token": d.guard.csrf_field(csrf_cookie),
        "read_only": role != ADMIN,
        "read_only_reason": ("ONCEBEAT_WEB_TOKEN is not set on the server" if d.guard.read_only else
                             f"logged in as {role}: actions need ONCEBEAT_WEB_TOKEN"),
        "configured": d.guard.configured,
        "role": role,
        "logged_in": role is not None,
        "flash": flash,
        "banners": _banners(request, role),
        "backend": d.runtime.store.backend,
        "now": d.runtime.clock.now(),
        "here": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        "schedule_zone": d.runtime.policy.tz,
        "display_zone": d.runtime.policy.tz if request.cookies.get(ZONE_COOKIE) == "schedule" else None,
    }
    ctx.update(context or {})
    part = request.query_params.get(PART_PARAM)
    if part is not None and request.method == "GET" and status == 200:
        return _render_part(d, template, part, ctx)
    response = d.templates.TemplateResponse(request, template, ctx, status_code=status)
    if new_cookie:
        response.set_cookie(CSRF_COOKIE, csrf_cookie, **d.guard.cookie_options())
    if flash:
        response.delete_cookie(FLASH_COOKIE, path="/")
    return response


def _render_part(d: Dashboard, template: str, part: str, ctx: dict[str, Any]) -> Response:
    """One live region of a page (``?part=``) rendered alone, for htmx to swap in; 404 names the page's parts."""
    env = d.templates.env
    found = _block(env, template, part)
    if found is None:
        parts = ", ".join(_parts(env, template)) or "none"
        return HTMLResponse(f"<p>no part {escape(part[:40])!r} on this page; its parts: {escape(parts)}</p>",
                            status_code=404)
    tmpl, block = found
    return HTMLResponse("".join(block(tmpl.new_context(ctx))))


def redirect_with(request: Request, message: str, target: str | None = None) -> Response:
    """Post/redirect/get: back to ``target`` (a local path; default the form's ``next``) with a flash message."""
    response = RedirectResponse(same_site_path(target), status_code=303)
    response.set_cookie(FLASH_COOKIE, quote(message[:500]), max_age=60, **dashboard(request).guard.cookie_options())
    return response


async def action_form(request: Request, *, action: bool = True) -> dict[str, str]:
    """The POSTed form after the CSRF check and (for ``action``) the operator-session check.

    Raises:
        ActionRefused: the check failed (rendered as a 401/403 page by the app's handler).
    """
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    guard = dashboard(request).guard
    if action:
        guard.check_action(request, values.get(CSRF_FIELD))
    else:
        guard.check_csrf(request, values.get(CSRF_FIELD))
    return values


def _api_answer(request: Request, status: int, kind: str, message: str) -> Response | None:
    """The JSON error for an ``/api`` path (None elsewhere: the page is rendered)."""
    return api_error(status, kind, message) if is_api_path(request.url.path) else None


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ActionRefused)
    return render(request, "refused.html", {"reason": exc.reason}, status=exc.status)


async def _library_error(request: Request, exc: Exception) -> Response:
    # A library error is the operator's problem to fix (unknown key, bad range): show it, status 400.
    answer = _api_answer(request, 400, "refused", str(exc))
    if answer is not None:
        return answer
    return render(request, "refused.html", {"reason": str(exc), "title": "Not done"}, status=400)


async def _not_found(request: Request, exc: Exception) -> Response:
    detail = getattr(exc, "detail", "") or "Not found"
    status = getattr(exc, "status_code", 404)
    answer = _api_answer(request, status, "not_found" if status == 404 else "method_not_allowed",
                         f"{detail}: GET /api/v1/openapi.json lists the routes and their methods")
    if answer is not None:
        return answer
    return render(request, "refused.html", {"reason": detail, "title": "Not found" if status == 404 else "Error"},
                  status=status)


def _routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for name in PAGE_MODULES:
        module = importlib.import_module(f"{__package__}.{name}")
        routes.extend(module.routes)
    for name in OPTIONAL_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise
            continue
        routes.extend(getattr(module, "routes", []))
    routes.append(Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"))
    return routes


def create_app(settings: WebSettings | None = None, *, runtime: Runtime | None = None,
               extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """Build the dashboard application.

    Args:
        settings: start-up options (see :class:`WebSettings`).
        runtime: an already opened runtime (tests); otherwise one is opened from ``settings``.
        extra_routes: more routes to mount (a library user's own pages).
    Returns:
        A Starlette ASGI app; its lifespan closes the store on shutdown.
    Raises:
        ConfigError, StoreError: the database or policy cannot be loaded, the viewer token equals the admin
            token, an API token is malformed or shared with the dashboard, or an allowed host is not a host name
            (before anything is served).
    """
    settings = settings or WebSettings()
    guard = Guard(settings.token, settings.secure_cookies, viewer_token=settings.viewer_token,
                  metrics_token=settings.metrics_token)
    api = ApiTokens(settings.api_tokens, other_tokens=(settings.token, settings.viewer_token, settings.metrics_token))
    hosts = allowed_hosts(settings.allowed_hosts)
    install_instruments()  # the families exist (at zero) even before anything happens in this process
    rt = runtime or load_runtime(config=settings.config, database_url=settings.database_url, app=settings.app,
                                 clock=settings.clock, migrate=settings.migrate)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            runs = app.state.dashboard.cache.get("doctor")
            if runs is not None:
                runs.wait(timeout=60.0)  # a background doctor run must not outlive the store it reads
            if runtime is None:
                rt.close()

    # Outermost first: headers on every answer, the Host check (DNS rebinding), bounded bodies, sessions and roles.
    middleware = [Middleware(SecurityHeaders),
                  Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
                  Middleware(BodyLimit),
                  Middleware(Gate, guard=guard, api=api)]
    app = Starlette(routes=[*_routes(), *extra_routes], middleware=middleware,
                    lifespan=lifespan,
                    exception_handlers={ActionRefused: _refused, OncebeatError: _library_error,
                                        404: _not_found, 405: _not_found})
    app.state.dashboard = Dashboard(runtime=rt, guard=guard, templates=_templates())
    return app


def html(text: str, status: int = 200) -> HTMLResponse:
    """A plain HTML response (for the few handlers that need no template)."""
    return HTMLResponse(text, status_code=status)


def route(path: str, endpoint: Any, methods: list[str] | None = None, name: str | None = None) -> Route:
    """A Route with the endpoint's name as the route name."""
    return Route(path, endpoint, methods=methods or ["GET"], name=name or endpoint.__name__)
