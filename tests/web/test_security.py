# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The dashboard's security defaults: loopback bind, a login for every page, the admin token + CSRF on every
action, nothing but "set ONCEBEAT_WEB_TOKEN" without a token, no secret or email address in a URL, autoescaped
templates, strict headers. Every route × role, the Host check and the login throttle: test_access.py."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from web_helpers import TOKEN, VIEWER_TOKEN, csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat.clock import ClockProcess
from oncebeat.reminders.runtime import Runtime
from oncebeat.web.security import Guard

PAGES = ["/", "/schedules", "/schedules/reminders", "/login"]


@pytest.fixture
def synced(runtime: Runtime) -> Runtime:
    """The reminder schedule synced into the database, as a clock does at start."""
    ClockProcess(runtime.app, runtime.store, clock=runtime.clock).sync()
    return runtime


def _pause(client: TestClient, *, csrf: str | None = None, headers: dict[str, str] | None = None) -> int:
    page = client.get("/schedules/reminders")
    data = {"csrf": csrf if csrf is not None else csrf_of(page.text)}
    return client.post("/schedules/reminders/pause", data=data, headers=headers or {}).status_code


def _state(rt: Runtime) -> str:
    return str(rt.store.read("get_schedule", key="reminders")[0]["state"])


def test_an_operator_with_the_token_can_pause_a_schedule(synced: Runtime,
                                                         dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role="admin")
    assert _pause(client) == 303
    assert _state(synced) == "paused"


def test_without_a_configured_token_every_page_only_says_how_to_set_one(
        synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(token=None, viewer_token=None, role=None)
    for path in ("/", "/schedules/reminders", "/jobs", "/reminders", "/doctor"):
        page = client.get(path)
        assert page.status_code == 503 and "ONCEBEAT_WEB_TOKEN" in page.text, path
        assert "reminders" not in page.text.replace("/reminders", ""), path  # no data, not even a schedule key
    login_page = client.get("/login")
    assert "set <code>ONCEBEAT_WEB_TOKEN</code>" in login_page.text and 'name="token"' not in login_page.text
    assert client.post("/login", data={"csrf": _csrf_field(client), "token": ""}).status_code == 503
    assert client.post("/schedules/reminders/pause", data={"csrf": _csrf_field(client)}).status_code == 503
    assert _state(synced) == "active"


def _csrf_field(client: TestClient) -> str:
    """A valid CSRF field for the client's cookie, made by the app's own guard (for pages that show no form)."""
    client.get("/login")
    guard = client.app.state.dashboard.guard  # type: ignore[attr-defined]
    return str(guard.csrf_field(client.cookies["oncebeat_csrf"]))


def test_an_action_without_the_admin_role_is_refused(synced: Runtime,
                                                     dashboard_client: Callable[..., TestClient]) -> None:
    anonymous = dashboard_client(role=None)
    response = anonymous.post("/schedules/reminders/pause", data={"csrf": _csrf_field(anonymous)})
    assert response.status_code == 401 and "log in" in response.text
    viewer = dashboard_client()
    assert _pause(viewer) == 403
    assert "logged in as viewer" in viewer.post("/schedules/reminders/pause",
                                                data={"csrf": _csrf_field(viewer)}).text
    assert _state(synced) == "active"


def test_a_wrong_token_does_not_log_in(synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role=None)
    page = client.get("/login")
    response = client.post("/login", data={"csrf": csrf_of(page.text), "token": TOKEN + "x"})
    assert response.status_code == 401
    assert "oncebeat_session" not in response.cookies
    assert client.get("/schedules/reminders").status_code == 303  # still anonymous: sent to /login


def test_an_action_without_the_csrf_field_is_refused_even_when_logged_in(
        synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    login(client)
    assert _pause(client, csrf="") == 403
    assert _pause(client, csrf="0" * 64) == 403
    assert _state(synced) == "active"


def test_a_cross_site_post_is_refused_even_with_a_session_and_a_valid_field(
        synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    login(client)
    assert _pause(client, headers={"origin": "https://evil.example.test"}) == 403
    assert _pause(client, headers={"sec-fetch-site": "cross-site"}) == 403
    assert _state(synced) == "active"


def test_a_session_made_with_another_token_is_not_accepted(synced: Runtime,
                                                           dashboard_client: Callable[..., TestClient]) -> None:
    old = dashboard_client(token="old-token", viewer_token="old-viewer", role="admin")
    admin_cookie = old.cookies.get("oncebeat_session")
    login(old, "old-viewer")
    viewer_cookie = old.cookies.get("oncebeat_session")
    assert admin_cookie != viewer_cookie
    new = dashboard_client(token=TOKEN, viewer_token=VIEWER_TOKEN, role=None)
    for cookie in (admin_cookie, viewer_cookie):
        new.cookies.set("oncebeat_session", cookie)
        assert new.get("/schedules/reminders").status_code == 303  # not a session here: off to /login
    # Only the changed role's sessions end: a new admin token keeps the viewer sessions.
    same_viewer = dashboard_client(token="another-admin-token", viewer_token="old-viewer", role=None)
    same_viewer.cookies.set("oncebeat_session", viewer_cookie)
    assert same_viewer.get("/schedules/reminders").status_code == 200
    same_viewer.cookies.set("oncebeat_session", admin_cookie)
    assert same_viewer.get("/schedules/reminders").status_code == 303
    # A viewer cookie edited to say admin fails its MAC.
    forged = "admin." + str(viewer_cookie).split(".", 1)[1]
    same_viewer.cookies.set("oncebeat_session", forged)
    assert same_viewer.get("/schedules/reminders").status_code == 303


def test_the_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    guard = Guard("short", viewer_token="viewer")
    assert not guard.token_matches("a much longer guess than the token")
    assert guard.token_matches("short")
    assert guard.login_role("viewer") == "viewer"
    # Digests of equal length go to hmac.compare_digest, whatever the lengths of token and guess, and every
    # configured token is compared whichever matches (two comparisons per login).
    assert seen == [(hashlib.sha256().digest_size,) * 2] * 6


def test_every_page_sends_a_strict_content_security_policy_and_security_headers(
        synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    for path in PAGES + ["/metrics", "/no-such-page"]:
        response = client.get(path)
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp, path
        assert "unsafe-eval" not in csp and "connect-src 'self'" in csp, path
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "same-origin"


def test_pages_hold_no_inline_script_no_inline_style_and_no_event_handler(
        synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    for path in PAGES:
        html = client.get(path).text
        # Only this origin's files: the vendored htmx and the dashboard's live.js, no inline code.
        scripts = re.findall(r"<script[^>]*>(.*?)</script>", html, re.S | re.I)
        assert scripts == ["", ""] and re.findall(r'<script src="([^"]+)"', html) == [
            "/static/vendor/htmx.min.js", "/static/live.js"], path
        assert not re.search(r"\sstyle=", html), path
        assert not re.search(r"\son[a-z]+=", html) and "hx-on" not in html, path


def test_cookies_are_http_only_and_same_site_strict(synced: Runtime,
                                                    dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role=None)
    page = client.get("/login")
    response = client.post("/login", data={"csrf": csrf_of(page.text), "token": TOKEN, "next": "/"})
    cookies = [v for k, v in response.headers.multi_items() if k == "set-cookie"]
    assert any(c.startswith("oncebeat_session=") for c in cookies)
    for c in cookies + [page.headers["set-cookie"]]:
        assert "HttpOnly" in c and "SameSite=strict" in c, c


def test_no_link_or_form_carries_the_token_or_an_email_address(
        synced: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role="admin")
    for path in PAGES:
        html = client.get(path).text
        for url in re.findall(r'(?:href|action|src)="([^"]*)"', html):
            assert TOKEN not in url and "@" not in url and "%40" not in url, (path, url)
        assert TOKEN not in html


def test_the_login_redirect_never_leaves_the_dashboard(synced: Runtime,
                                                       dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client()
    page = client.get("/login")
    for target in ("https://evil.example.test/", "//evil.example.test/x", "/\\evil.example.test"):
        response = client.post("/login", data={"csrf": csrf_of(page.text), "token": TOKEN, "next": target})
        assert response.headers["location"] == "/", target


def _listening_addresses(port: int) -> set[str]:
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":  # 0A = LISTEN
                found.add(address)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_oncebeat_web_binds_the_loopback_address_unless_told_otherwise(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/oncebeat.db"}
    env.pop("ONCEBEAT_WEB_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "web", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not _listening_addresses(port) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1, and nothing else
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert b"ONCEBEAT_WEB_TOKEN" in err
