"""Fixtures and helpers for the dashboard tests (import the fixtures into a test module to use them): a runtime on a fresh database of each backend and an in-process client.

``dashboard_client(token=...)`` builds the real application (real store, real templates, real middleware)
and returns a Starlette TestClient bound to it; ``login(client, token)`` posts the token like a browser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from oncebeat.reminders.policy import write_default_config
from oncebeat.reminders.runtime import Runtime, load_runtime
from oncebeat.web import WebSettings, create_app

TOKEN = "operator-token-for-tests"


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
    """Factory: ``dashboard_client(token="...")`` → a client of a dashboard started with that token (or None)."""
    clients: list[TestClient] = []

    def make(token: str | None = TOKEN) -> TestClient:
        client = TestClient(create_app(WebSettings(token=token), runtime=runtime), base_url="http://127.0.0.1:8000",
                            follow_redirects=False)
        client.__enter__()
        clients.append(client)
        return client

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
