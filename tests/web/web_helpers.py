"""Fixtures and helpers for the dashboard tests (import the fixtures into a test module to use them): a runtime
on a fresh database of each backend and an in-process client.

``dashboard_client(token=..., role=...)`` builds the real application (real store, real templates, real
middleware) and returns a Starlette TestClient bound to it, from a loopback address, logged in as ``role``
(``viewer`` by default: every page, no action; ``admin``; None for an anonymous client);
``login(client, token)`` posts a token like a browser.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.web import WebSettings, create_app

TOKEN = "operator-token-for-tests"
VIEWER_TOKEN = "viewer-token-for-tests"
LOOPBACK_CLIENT = ("127.0.0.1", 50000)


@pytest.fixture
def runtime(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """The reminder app's runtime on a fresh, migrated database (the dashboard's view of the system)."""
    write_default_config(tmp_path / "oncebeat.toml")
    rt = load_runtime(database_url=db_url, config=tmp_path / "oncebeat.toml")
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def dashboard_client(runtime: Runtime) -> Iterator[Callable[..., TestClient]]:
    """Factory: ``dashboard_client(token=..., viewer_token=..., role=..., **settings)`` → a logged-in client.

    ``role`` is ``"viewer"`` (default), ``"admin"`` or None (no session); ``settings`` are more
    :class:`WebSettings` fields; ``client`` is the peer address the app sees (loopback by default).
    """
    clients: list[TestClient] = []

    def make(token: str | None = TOKEN, *, viewer_token: str | None = VIEWER_TOKEN, role: str | None = "viewer",
             client: tuple[str, int] = LOOPBACK_CLIENT, base_url: str = "http://127.0.0.1:8000",
             **settings: object) -> TestClient:
        app = create_app(WebSettings(token=token, viewer_token=viewer_token, **settings),  # type: ignore[arg-type]
                         runtime=runtime)
        tc = TestClient(app, base_url=base_url, follow_redirects=False, client=client)
        tc.__enter__()
        clients.append(tc)
        if role == "admin":
            login(tc, token or "")
        elif role == "viewer" and viewer_token:
            login(tc, viewer_token)
        return tc

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def csrf_of(html: str) -> str:
    """The CSRF field of the first form on a page."""
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "the page has no form with a CSRF field"
    return match.group(1)


def login(client: TestClient, token: str = TOKEN) -> None:
    """Log in as a browser does: fetch the form (CSRF cookie), post the token."""
    page = client.get("/login")
    response = client.post("/login", data={"csrf": csrf_of(page.text), "token": token, "next": "/"})
    assert response.status_code == 303, response.text


@contextmanager
def serve_web(db_url: str, config: Path, cwd: Path, **env: str) -> Iterator[str]:
    """``oncebeat web`` as a real process on a free loopback port for a browser test, with ``env`` added (the
    tokens): yields its base URL once it answers, and stops it (by its pid) afterwards."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-m", "oncebeat.cli", "web", "--port", str(port), "--db", db_url,
                             "--config", str(config)], env={**os.environ, **env}, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    assert proc.stderr is not None
                    raise AssertionError(f"oncebeat web did not start: {proc.stderr.read().decode()}") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
