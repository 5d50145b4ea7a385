# ruff: noqa: F811  (fixtures imported from the helpers are redefined as test arguments, as pytest intends)
"""Who may call the HTTP API (issue 25 item 2): every ``/api`` route of the app × no token, a wrong token, the
read token, the write token and the dashboard's admin session cookie only; an API token never opens a dashboard
page; no API token configured → 503; a malformed ``ONCEBEAT_API_TOKENS`` is refused at start naming the entry,
never echoing the token.

The route list is read from ``app.routes``, so an API route added later is checked without editing this file.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from api_helpers import API_TOKENS, READ, READ_TOKEN, WRITE_TOKEN, api_app, invoice, write_headers  # noqa: F401
from starlette.routing import Route
from starlette.testclient import TestClient
from web_helpers import TOKEN, login, runtime  # noqa: F401  (fixtures)

from oncebeat.errors import ConfigError
from oncebeat.reminders.runtime import Runtime
from oncebeat.web import WebSettings, create_app
from oncebeat.web.api_auth import ApiTokens

SAMPLES = {"{key:path}": "reminders", "{number:path}": "INV-1001", "{id:id}": "1", "{queue:path}": "default",
           "{name}": "default"}
# A valid body for each write (the write token's answer must be the write's own, not a 422).
BODIES: dict[str, Any] = {
    "/api/v1/customers": {"customers": [{"email": "zoe@example.com", "name": "Zoë Martin"}]},
    "/api/v1/invoices": {"invoices": [invoice("INV-1001")]},
    "/api/v1/payments": {"payments": [{"invoice_number": "INV-1001", "paid_on": "2026-02-20"}]},
    "/api/v1/jobs": {"task": "reminders.send", "args": {"reminder_id": 1}},
    "/api/v1/holds": {"invoice_number": "INV-1001", "reason": "manual"},
    "/api/v1/holds/release": {"invoice_number": "INV-1001"},
    "/api/v1/queues/{queue:path}/limit": {"limit": 3},
    "/api/v1/ladders/{name}/apply": {},
}


def _api_endpoints(client: TestClient) -> list[tuple[str, str, str]]:
    out = []
    for r in client.app.routes:
        if isinstance(r, Route) and r.path.startswith("/api/"):
            url = r.path
            for pattern, value in SAMPLES.items():
                url = url.replace(pattern, value)
            assert "{" not in url, f"route {r.path}: add a sample for its parameter to SAMPLES"
            for method in sorted((r.methods or {"GET"}) - {"HEAD"}):
                out.append((r.path, method, url))
    return out


def test_every_api_route_for_no_token_a_wrong_one_read_write_and_a_dashboard_session(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    setup = client.post("/api/v1/invoices", json={"invoices": [invoice("INV-1001")]}, headers=write_headers())
    assert setup.status_code == 200, setup.text
    endpoints = _api_endpoints(client)
    assert len(endpoints) >= 13, endpoints
    session = api_app()
    login(session, TOKEN)  # the dashboard's admin: its cookie must not open the API
    checked = 0
    for path, method, url in endpoints:
        where = f"{method} {url}"
        body = BODIES.get(path) if method == "POST" else None

        def send(c: TestClient, headers: dict[str, str], method: str = method, url: str = url,
                 body: Any = body) -> Any:
            return c.request(method, url, json=body, headers=headers)

        nobody = send(client, {"idempotency-key": "k-nobody"})
        assert nobody.status_code == 401, where
        assert nobody.headers["www-authenticate"].startswith("Bearer"), where
        assert "Zoë" not in nobody.text and "INV-1001" not in nobody.text, where
        wrong = send(client, {"authorization": f"Bearer {WRITE_TOKEN}x", "idempotency-key": "k-wrong"})
        assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"], where
        assert WRITE_TOKEN not in wrong.text, where
        cookie_only = send(session, {"idempotency-key": "k-cookie"})
        assert cookie_only.status_code == 401, where
        dashboard_token = send(client, {"authorization": f"Bearer {TOKEN}", "idempotency-key": "k-dash"})
        assert dashboard_token.status_code == 401, where
        read = send(client, {**READ, "idempotency-key": "k-read"})
        if method == "GET":
            assert read.status_code == 200, (where, read.text)
        else:
            assert read.status_code == 403 and "read scope" in read.text, where
        written = send(client, write_headers())
        assert written.status_code in (200, 201), (where, written.text)
        assert written.headers["content-type"].startswith("application/json"), where
        checked += 6
    print(f"\nAPI routes x credentials: {len(endpoints)} endpoints x 6 = {checked} requests")


def test_an_api_token_never_opens_a_dashboard_page(api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    for token in (WRITE_TOKEN, READ_TOKEN):
        page = client.get("/reminders", headers={"authorization": f"Bearer {token}"})
        assert page.status_code == 303 and page.headers["location"].startswith("/login"), token
        action = client.post("/schedules/reminders/pause", headers={"authorization": f"Bearer {token}"})
        assert action.status_code == 401
        login_attempt = client.post("/login", data={"token": token})
        assert "oncebeat_session" not in login_attempt.cookies


def test_without_api_tokens_every_api_route_answers_503_naming_the_variable(
        api_app: Callable[..., TestClient]) -> None:
    client = api_app(api_tokens=None)
    for url in ("/api/v1/openapi.json", "/api/v1/reminders", "/api", "/api/v1/nothing"):
        response = client.get(url, headers={"authorization": f"Bearer {WRITE_TOKEN}"})
        assert response.status_code == 503 and "ONCEBEAT_API_TOKENS" in response.json()["error"]["message"], url
    assert client.post("/api/v1/invoices", json={}).status_code == 503


@pytest.mark.parametrize(("spec", "needle"), [
    ("billing:write:short", "at least 24 characters"),
    ("billing:admin:" + "x" * 30, "scope must be read or write"),
    ("bad name:write:" + "x" * 30, "the name must be"),
    ("a:write:" + "x" * 30 + ",a:read:" + "y" * 30, "the name is given twice"),
    ("a:write:" + "x" * 30 + ",b:read:" + "x" * 30, "the token is given twice"),
    ("a:write:" + TOKEN + "-padding-to-24", None),
])
def test_malformed_api_tokens_are_refused_at_start_without_echoing_the_token(spec: str, needle: str | None) -> None:
    if needle is None:
        ApiTokens(spec, other_tokens=(TOKEN,))  # another value than the dashboard's: accepted
        with pytest.raises(ConfigError, match="also a dashboard or /metrics token"):
            ApiTokens("a:write:" + "z" * 30, other_tokens=("z" * 30,))
        return
    with pytest.raises(ConfigError, match=re.escape(needle)) as caught:
        ApiTokens(spec)
    assert "x" * 30 not in str(caught.value) and "ONCEBEAT_API_TOKENS entry" in str(caught.value)


def test_an_api_token_shared_with_the_dashboard_stops_the_app_from_starting(runtime: Runtime) -> None:
    with pytest.raises(ConfigError, match="dashboard"):
        create_app(WebSettings(token="t" * 30, api_tokens="billing:write:" + "t" * 30), runtime=runtime)


def test_the_token_names_and_scopes_are_known_but_never_the_tokens() -> None:
    tokens = ApiTokens(API_TOKENS)
    assert tokens.names() == ["billing (write)", "looker (read)"]
    assert WRITE_TOKEN not in repr(tokens.__dict__.get("_tokens"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_oncebeat_web_serves_the_api_from_its_environment_and_refuses_a_malformed_list(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEBEAT_")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path}/oncebeat.db"
    bad = subprocess.run([sys.executable, "-m", "oncebeat.cli", "web", "--port", "1"], cwd=tmp_path, text=True,
                         capture_output=True, timeout=60,
                         env={**env, "ONCEBEAT_API_TOKENS": f"billing:write:{WRITE_TOKEN},looker:reed:{READ_TOKEN}"})
    assert bad.returncode == 2 and "ONCEBEAT_API_TOKENS entry 2:" in bad.stderr
    assert READ_TOKEN not in bad.stderr and WRITE_TOKEN not in bad.stderr and "Traceback" not in bad.stderr
    # A token written alone, or before its name, is never echoed as if it were the name.
    for entries in (READ_TOKEN, f"{READ_TOKEN}:write:billing"):
        alone = subprocess.run([sys.executable, "-m", "oncebeat.cli", "web", "--port", "1"], cwd=tmp_path, text=True,
                               capture_output=True, timeout=60, env={**env, "ONCEBEAT_API_TOKENS": entries})
        assert alone.returncode == 2 and "entry 1" in alone.stderr and READ_TOKEN not in alone.stderr
    port = _free_port()
    # API tokens alone are a token: a public bind is allowed (the dashboard's pages then say how to log in).
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "web", "--host", "0.0.0.0", "--port", str(port)],
                            env={**env, "ONCEBEAT_API_TOKENS": API_TOKENS}, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/schedules",
                                             headers={"authorization": f"Bearer {READ_TOKEN}"})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    assert json.loads(response.read())["schedules"][0]["key"] == "reminders"
                    break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        refused = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/schedules/reminders/pause", data=b"",
                                         headers={"authorization": f"Bearer {READ_TOKEN}", "idempotency-key": "k"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(refused, timeout=5)
        assert caught.value.code == 403
        caught.value.close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "/api/v1 tokens: billing (write), looker (read)" in err
    assert WRITE_TOKEN not in err and READ_TOKEN not in err
