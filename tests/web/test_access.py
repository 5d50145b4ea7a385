# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""Who may see what (issue 21 item 1): every route of the app × no session / viewer / admin, the Host
allow-list, /metrics' own rule, the login throttle, and ``oncebeat web`` refusing a public bind without a token.

The route list is read from ``app.routes``, so a route added later is checked without editing this file: it
must refuse an anonymous client (unless listed in ``ANONYMOUS``) and a viewer's POST (unless it only reads).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.routing import Mount, Route
from starlette.testclient import TestClient
from web_helpers import TOKEN, VIEWER_TOKEN, csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat.clock import ClockProcess
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime
from oncebeat.web.security import LoginThrottle
from oncebeat.worker import Worker

# Customer data planted in the database: none of it may reach a client without a session.
SECRETS = ("Confidential", "zoe.confidential", "INV-PRIVATE-77", "9,876.54", "9876.54", "Rua Sigilosa")
# Routes any client may reach, and what they may answer (each authenticates itself or shows nothing private).
ANONYMOUS = {("/login", "GET"): {200}, ("/login", "POST"): {401},
             ("/webhooks/stripe", "POST"): {400}, ("/metrics", "GET"): {200},
             ("/static", "GET"): {200}}
VIEWER_POSTS = {"/login", "/logout", "/reminders/search", "/zone", "/live"}


@dataclass
class Seeded:
    job_id: int
    occurrence_id: int
    reminder_id: int


@pytest.fixture
def seeded(runtime: Runtime) -> Seeded:
    """An overdue invoice of a customer whose data must stay private, its scan run and a reminder made."""
    today = runtime.clock.now().astimezone(runtime.policy.zone).date()
    runtime.service.upsert(
        [Customer(email="zoe.confidential@example.test", name="Zoë Confidential (Rua Sigilosa 7)")],
        [Invoice(number="INV-PRIVATE-77", customer_email="zoe.confidential@example.test", currency="EUR",
                 amount_due=987_654, issued_on=today - timedelta(days=40), due_on=today - timedelta(days=10))])
    clock = ClockProcess(runtime.app, runtime.store, clock=runtime.clock)
    clock.sync()
    fire = clock.trigger("reminders")
    Worker(runtime.app, runtime.store, clock=runtime.clock).drain(max_batches=1)  # the scan makes the reminders
    [reminder, *_] = runtime.store.read("list_reminders")
    assert fire.job_id is not None and fire.occurrence_id is not None
    return Seeded(job_id=fire.job_id, occurrence_id=fire.occurrence_id, reminder_id=int(reminder["id"]))


#: GET routes whose thing the seeded book has none of (it sends no attachment): a logged-in request gets 404 here;
#: the 200 is tests/web/test_attachments_page.py's. A request without a session is still refused first.
SEEDED_WITHOUT = {"/reminders/{id:id}/attachments/{position:int}"}


def _concrete(path: str, s: Seeded) -> str:
    """A URL for route ``path`` whose parameters name things that exist (a new parameter needs a sample)."""
    ids = {"/jobs": s.job_id, "/occurrences": s.occurrence_id, "/reminders": s.reminder_id}
    samples = {"{key:path}": "reminders", "{number:path}": "INV-PRIVATE-77", "{kind}": "job",
               "{ident:path}": str(s.job_id), "{queue:path}": "default",
               "{position:int}": "0", "{id:id}": str(ids.get("/" + path.split("/")[1], 1)), "{name}": "default"}
    for pattern, value in samples.items():
        path = path.replace(pattern, value)
    assert "{" not in path, f"route {path}: add a sample value for its parameter to _concrete"
    return path


def _endpoints(client: TestClient, s: Seeded) -> list[tuple[str, str, str]]:
    """(route path, method, concrete URL) for every route of the app: Routes by method, Mounts by a file."""
    out = []
    for r in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(r, Route) and r.path.startswith("/api/"):
            continue  # the HTTP API takes its own bearer tokens, never a session: tests/web/test_api_access.py
        if isinstance(r, Route):
            for method in sorted((r.methods or {"GET"}) - {"HEAD"}):
                out.append((r.path, method, _concrete(r.path, s)))
        elif isinstance(r, Mount):
            out.append((r.path, "GET", r.path + "/style.css"))
        else:
            raise AssertionError(f"a route of an unknown kind: {r!r}; teach this test to reach it")
    return out


def _csrf(client: TestClient) -> str:
    """A valid CSRF field for the client's cookie (the login page always has a form)."""
    return csrf_of(client.get("/login").text)


def _form_for(url: str) -> dict[str, str]:
    """Fields that make each action's form complete (so the admin's answer is the action's, not a 400)."""
    if url.endswith("/backfill"):
        return {"from": "2026-01-01T08:00", "until": "2026-01-02T08:00"}
    if url.endswith("/set"):
        return {"expression": "0 8 * * *", "tz": "America/Chicago"}
    if url == "/effects/resolve":
        return {"key": "no-such-effect", "outcome": "done"}
    if url == "/jobs/bulk":
        return {"do": "retry:matching", "state": "completed"}
    if url == "/jobs/bulk/run":
        return {"verb": "retry", "ids": "1", "count": "1"}
    if url.endswith("/limit"):
        return {"max_running": "3"}
    if url == "/zone":
        return {"zone": "schedule", "next": "/"}
    if url == "/live":
        return {"live": "off", "next": "/"}
    if url == "/reminders/search":
        return {"q": "INV-PRIVATE-77"}
    if url == "/login":
        return {"token": "a wrong token", "next": "/"}
    if url == "/policies/default/apply":
        return {"expected": "0"}
    return {}


def test_every_route_for_no_session_a_viewer_and_an_admin(runtime: Runtime, seeded: Seeded,
                                                          dashboard_client: Callable[..., TestClient],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", "whsec_for_the_route_matrix")  # unsigned posts: 400
    clients = {role: dashboard_client(role=role) for role in (None, "viewer", "admin")}
    endpoints = _endpoints(clients[None], seeded)
    assert len(endpoints) >= 25, endpoints  # every page, action, login, webhook, metrics and static
    checked = 0
    seen: dict[tuple[str | None, str, str], int] = {}
    for role, client in clients.items():
        # Reads first, then POSTs; retiring the schedule and logging out last.
        order = sorted(endpoints, key=lambda e: (e[1] != "GET", e[0] in ("/logout", "/schedules/{key:path}/retire"),
                                                 e[0]))
        for path, method, url in order:
            where = f"{method} {url} as {role or 'nobody'}"
            if method == "GET":
                response = client.get(url)
            else:
                response = client.post(url, data={"csrf": _csrf(client), **_form_for(url)})
            status = response.status_code
            assert status < 500, where
            checked += 1
            seen[(role, method, path)] = status
            allowed = ANONYMOUS.get((path, method))
            if allowed is not None:  # the same answer whoever asks: the route has its own check
                assert status in allowed, (where, status)
            elif role is None:
                assert status in (303, 401), where
                if status == 303:
                    assert response.headers["location"].startswith("/login?next="), where
            elif method == "GET" and path in SEEDED_WITHOUT:
                assert status in (200, 404), (where, status)
            elif method == "GET":
                assert status == 200, (where, status, response.text[:300])
            elif role == "viewer" and path not in VIEWER_POSTS:
                assert status == 403 and "you are logged in as viewer" in response.text, (where, status)
            else:
                assert status in (200, 303, 400) and "you are logged in as" not in response.text, (where, status)
                if path == "/logout":
                    assert status == 303
                    login(client, TOKEN if role == "admin" else VIEWER_TOKEN)
            if role is None:
                for secret in SECRETS:
                    assert secret not in response.text, (where, secret)
    assert checked == 3 * len(endpoints)
    done = {p for (r, m, p), st in seen.items() if r == "admin" and m == "POST" and st == 303}
    assert {"/jobs/{id:id}/cancel", "/jobs/{id:id}/retry", "/schedules/{key:path}/pause",
            "/queues/{queue:path}/pause", "/queues/{queue:path}/resume", "/queues/{queue:path}/limit",
            "/jobs/bulk/run", "/schedules/{key:path}/set",
            "/schedules/{key:path}/resume", "/schedules/{key:path}/trigger", "/schedules/{key:path}/backfill",
            "/schedules/{key:path}/retire"} <= done, done  # the admin's actions really ran
    # What the viewer's and the admin's pages do show: the customer (so the anonymous check above is meaningful).
    page = clients["viewer"].get("/reminders/invoices/INV-PRIVATE-77").text
    assert "Confidential" in page and "9,876.54" in page
    print(f"\nroutes x roles: {len(endpoints)} endpoints x 3 roles = {checked} requests")


def test_a_foreign_host_header_gets_400_and_no_data(runtime: Runtime, seeded: Seeded,
                                                    dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role="admin", allowed_hosts=("dash.example.test", "*.example.org"))
    url = "/reminders/invoices/INV-PRIVATE-77"
    assert client.get(url).status_code == 200
    for host in ("evil.example.test", "attacker.test:8000", "127.0.0.1.evil.test", "dash.example.test.evil.test",
                 "example.org.evil.test", ""):
        response = client.get(url, headers={"host": host})
        assert response.status_code == 400, host
        assert all(s not in response.text for s in SECRETS), host
        assert client.post("/webhooks/stripe", content=b"{}", headers={"host": host}).status_code == 400
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000", "dash.example.test", "DASH.example.test:443",
                 "a.example.org"):
        assert client.get(url, headers={"host": host}).status_code == 200, host


def test_the_loopback_names_are_the_only_default_hosts(runtime: Runtime,
                                                       dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role="admin")
    assert client.get("/", headers={"host": "dash.example.test"}).status_code == 400
    assert client.get("/", headers={"host": "localhost:1234"}).status_code == 200


def test_300_wrong_tokens_are_throttled_and_the_right_one_works_after_the_window(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    client = dashboard_client(role=None)
    now = [1000.0]
    throttle = LoginThrottle(now=lambda: now[0])
    client.app.state.dashboard.throttle = throttle  # type: ignore[attr-defined]
    csrf = _csrf(client)
    statuses = []
    started = time.monotonic()
    for n in range(300):
        response = client.post("/login", data={"csrf": csrf, "token": f"guess-{n}"})
        statuses.append(response.status_code)
        assert "oncebeat_session" not in response.cookies
    elapsed = time.monotonic() - started
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429] * 290
    blocked = client.post("/login", data={"csrf": csrf, "token": TOKEN})  # the right token, while blocked
    assert blocked.status_code == 429 and "oncebeat_session" not in blocked.cookies
    assert 0 < int(blocked.headers["retry-after"]) <= 900 and "try again in" in blocked.text
    # Another address is not held back by this one's failures.
    other = dashboard_client(role=None, client=("127.0.0.2", 40000))
    other.app.state.dashboard.throttle = throttle  # type: ignore[attr-defined]
    assert other.post("/login", data={"csrf": _csrf(other), "token": TOKEN}).status_code == 303
    now[0] += 899
    assert client.post("/login", data={"csrf": csrf, "token": TOKEN}).status_code == 429
    now[0] += 2  # the window has passed
    assert client.post("/login", data={"csrf": csrf, "token": TOKEN}).status_code == 303
    assert client.get("/jobs").status_code == 200
    print(f"\n300 wrong tokens: 10 answered 401, 290 answered 429 (Retry-After <= 900 s) in {elapsed:.2f} s")


def test_the_throttle_table_is_bounded_and_keys_ipv6_by_its_64() -> None:
    throttle = LoginThrottle(max_clients=100)
    for n in range(10_000):
        throttle.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
    assert len(throttle) == 100
    for suffix in range(12):
        throttle.failed(f"2001:db8:1:2::{suffix:x}")
    assert throttle.retry_after("2001:db8:1:2:ffff::1") is not None  # the same /64: one client
    assert throttle.retry_after("2001:db8:1:3::1") is None


def test_metrics_answers_loopback_clients_or_its_bearer_token(runtime: Runtime,
                                                              dashboard_client: Callable[..., TestClient]) -> None:
    loopback = dashboard_client(role=None)
    assert loopback.get("/metrics").status_code == 200
    # Through a proxy on this host that forwards a public name: not a loopback client.
    proxied = dashboard_client(role=None, allowed_hosts=("dash.example.test",))
    refused = proxied.get("/metrics", headers={"host": "dash.example.test"})
    assert refused.status_code == 403 and "ONCEBEAT_METRICS_TOKEN" in refused.text
    assert "oncebeat_jobs" not in refused.text
    remote = dashboard_client(role="admin", client=("203.0.113.9", 40000))
    assert remote.get("/metrics").status_code == 403  # an admin session is not a scrape credential
    with_token = dashboard_client(role=None, client=("203.0.113.9", 40000), metrics_token="scrape-token")
    assert with_token.get("/metrics").status_code == 401
    assert with_token.get("/metrics").headers["www-authenticate"].startswith("Bearer")
    assert with_token.get("/metrics", headers={"authorization": "Bearer wrong"}).status_code == 401
    ok = with_token.get("/metrics", headers={"authorization": "Bearer scrape-token"})
    assert ok.status_code == 200 and "oncebeat_jobs" in ok.text
    local_with_token = dashboard_client(role=None, metrics_token="scrape-token")
    assert local_with_token.get("/metrics").status_code == 401  # with a token, everyone needs it


def test_an_equal_viewer_and_admin_token_is_refused(runtime: Runtime,
                                                    dashboard_client: Callable[..., TestClient]) -> None:
    from oncebeat.errors import ConfigError

    with pytest.raises(ConfigError, match="ONCEBEAT_WEB_VIEWER_TOKEN equals ONCEBEAT_WEB_TOKEN"):
        dashboard_client(token="same", viewer_token="same", role=None)


def _oncebeat_web(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", "web", *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=60)


@pytest.fixture
def web_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEBEAT_WEB")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path}/oncebeat.db"
    yield env


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_a_public_bind_without_a_token_is_refused_at_start(host: str, web_env: dict[str, str],
                                                           tmp_path: Path) -> None:
    done = _oncebeat_web("--host", host, "--port", "1", env=web_env, cwd=tmp_path)
    assert done.returncode == 2
    assert "ONCEBEAT_WEB_TOKEN" in done.stderr and f"--host {host}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "oncebeat.db").exists()  # refused before opening anything


def test_a_malformed_allowed_host_is_refused_at_start(web_env: dict[str, str], tmp_path: Path) -> None:
    done = _oncebeat_web("--allowed-host", "https://dash.example.test/", "--port", "1", env=web_env, cwd=tmp_path)
    assert done.returncode == 2
    assert "'https://dash.example.test/' (--allowed-host, ONCEBEAT_WEB_ALLOWED_HOSTS) is not a host name" in done.stderr
    done = _oncebeat_web("--port", "1", env={**web_env, "ONCEBEAT_WEB_ALLOWED_HOSTS": "ok.example.test, *bad"},
                         cwd=tmp_path)
    assert done.returncode == 2 and "'*bad'" in done.stderr


def test_a_route_added_later_is_private_by_default(runtime: Runtime) -> None:
    from starlette.responses import PlainTextResponse
    from web_helpers import LOOPBACK_CLIENT

    from oncebeat.web import WebSettings, create_app

    def custom(request: object) -> PlainTextResponse:
        return PlainTextResponse("Confidential report")

    extra = [Route("/custom", custom), Route("/custom", custom, methods=["POST"], name="custom_post")]
    app = create_app(WebSettings(token=TOKEN, viewer_token=VIEWER_TOKEN), runtime=runtime, extra_routes=extra)
    with TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False, client=LOOPBACK_CLIENT) as c:
        assert c.get("/custom").status_code == 303
        assert c.post("/custom").status_code == 401
        login(c, VIEWER_TOKEN)
        assert c.get("/custom").text == "Confidential report"
        assert c.post("/custom").status_code == 403  # a viewer's POST is refused unless it is known to only read
        login(c, TOKEN)
        assert c.post("/custom").status_code == 200
