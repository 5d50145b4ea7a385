"""Log in with the operator token (``ONCEBEAT_WEB_TOKEN``) and log out. The token travels only in a POST body."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .app import action_form, dashboard, redirect_with, render, route
from .security import SESSION_COOKIE, SESSION_SECONDS, ActionRefused, same_site_path

__all__ = ["routes"]


async def login_page(request: Request) -> Response:
    return render(request, "login.html", {"next": same_site_path(request.query_params.get("next"))})


async def login(request: Request) -> Response:
    form = await action_form(request, action=False)
    guard = dashboard(request).guard
    if guard.read_only:
        raise ActionRefused("read-only dashboard: ONCEBEAT_WEB_TOKEN is not set on the server")
    if not guard.token_matches(form.get("token", "")):
        raise ActionRefused("wrong token", status=401)
    response = redirect_with(request, "logged in: actions are enabled for 12 hours", form.get("next"))
    response.set_cookie(SESSION_COOKIE, guard.new_session(), max_age=SESSION_SECONDS, **guard.cookie_options())
    return response


async def logout(request: Request) -> Response:
    await action_form(request, action=False)
    response = redirect_with(request, "logged out", "/")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


routes = [
    route("/login", login_page),
    route("/login", login, methods=["POST"]),
    route("/logout", logout, methods=["POST"]),
]
