"""Log in with a token and log out. The token travels only in a POST body.

``ONCEBEAT_WEB_TOKEN`` opens an ``admin`` session, ``ONCEBEAT_WEB_VIEWER_TOKEN`` a ``viewer`` one (see
:mod:`oncebeat.web.security`). Failed logins are counted per client address: past the limit, ``/login``
answers 429 with ``Retry-After`` until the window ends (:class:`~oncebeat.web.security.LoginThrottle`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .app import LIVE_COOKIE, LIVE_SECONDS, ZONE_COOKIE, action_form, dashboard, redirect_with, render, route
from .security import ADMIN, SESSION_COOKIE, SESSION_SECONDS, ActionRefused, same_site_path

__all__ = ["routes"]


async def login_page(request: Request) -> Response:
    return render(request, "login.html", {"next": same_site_path(request.query_params.get("next"))})


async def login(request: Request) -> Response:
    form = await action_form(request, action=False)
    d = dashboard(request)
    guard = d.guard
    if not guard.configured:
        raise ActionRefused("no token is configured: set ONCEBEAT_WEB_TOKEN on the server", status=503)
    client = request.client.host if request.client else None
    wait = d.throttle.retry_after(client)
    if wait is not None:
        response = render(request, "refused.html", {
            "title": "Too many attempts",
            "reason": f"too many wrong tokens from this address: try again in {wait} seconds"}, status=429)
        response.headers["retry-after"] = str(wait)
        return response
    role = guard.login_role(form.get("token", ""))
    if role is None:
        d.throttle.failed(client)
        raise ActionRefused("wrong token", status=401)
    d.throttle.succeeded(client)
    what = "actions are enabled" if role == ADMIN else "read-only (viewer)"
    response = redirect_with(request, f"logged in as {role}: {what} for 12 hours", form.get("next"))
    response.set_cookie(SESSION_COOKIE, guard.new_session(role), max_age=SESSION_SECONDS, **guard.cookie_options())
    return response


async def logout(request: Request) -> Response:
    await action_form(request, action=False)
    response = redirect_with(request, "logged out", "/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


async def choose_zone(request: Request) -> Response:
    """The operator's zone for instants on every page: UTC or the schedule's (a preference, any role; a cookie)."""
    form = await action_form(request, action=False)
    zone = "schedule" if form.get("zone") == "schedule" else "utc"
    rt = dashboard(request).runtime
    shown = f"{rt.policy.tz} (the schedule's zone)" if zone == "schedule" else "UTC"
    response = redirect_with(request, f"times are now shown in {shown}", form.get("next") or "/")
    response.set_cookie(ZONE_COOKIE, zone, max_age=365 * 86400, **dashboard(request).guard.cookie_options())
    return response


async def choose_live(request: Request) -> Response:
    """Pause or resume the live refresh of every page (a preference, any role; a cookie, ``off`` while paused)."""
    form = await action_form(request, action=False)
    paused = form.get("live") == "off"
    message = ("live refresh paused: pages show what they had when loaded; reload for new numbers" if paused else
               f"live refresh on: each page's numbers are fetched again every {LIVE_SECONDS} s")
    response = redirect_with(request, message, form.get("next") or "/")
    response.set_cookie(LIVE_COOKIE, "off" if paused else "on", max_age=365 * 86400,
                        **dashboard(request).guard.cookie_options())
    return response


routes = [
    route("/login", login_page),
    route("/login", login, methods=["POST"]),
    route("/logout", logout, methods=["POST"]),
    route("/zone", choose_zone, methods=["POST"]),
    route("/live", choose_live, methods=["POST"]),
]
