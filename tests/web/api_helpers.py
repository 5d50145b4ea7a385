"""Fixtures for the HTTP API tests: the real application on a fresh database of each backend, with a write token,
a read token and the dashboard's tokens, and helpers that send keyed writes.

``api_app(**settings)`` returns a TestClient without credentials; ``write_headers(key)``/``READ`` carry tokens.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient
from web_helpers import LOOPBACK_CLIENT, TOKEN, VIEWER_TOKEN

from oncebeat.reminders.runtime import Runtime
from oncebeat.web import WebSettings, create_app

WRITE_TOKEN = "api-write-token-for-tests-0123456789"
READ_TOKEN = "api-read-token-for-tests-0123456789ab"
API_TOKENS = f"billing:write:{WRITE_TOKEN}, looker:read:{READ_TOKEN}"
READ = {"authorization": f"Bearer {READ_TOKEN}"}


def write_headers(key: str | None = None) -> dict[str, str]:
    """The write token and an Idempotency-Key (a new UUID unless ``key``)."""
    return {"authorization": f"Bearer {WRITE_TOKEN}", "idempotency-key": key or str(uuid.uuid4())}


@pytest.fixture
def api_app(runtime: Runtime) -> Iterator[Callable[..., TestClient]]:
    """Factory: ``api_app(api_tokens=API_TOKENS, **settings)`` → a TestClient on the real app (no credentials)."""
    clients: list[TestClient] = []

    def make(api_tokens: str | None = API_TOKENS, **settings: object) -> TestClient:
        options: dict[str, object] = {"token": TOKEN, "viewer_token": VIEWER_TOKEN, **settings}
        app = create_app(WebSettings(api_tokens=api_tokens, **options), runtime=runtime)  # type: ignore[arg-type]
        tc = TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False, client=LOOPBACK_CLIENT)
        tc.__enter__()
        clients.append(tc)
        return tc

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def invoice(number: str, **fields: str | None) -> dict[str, str | None]:
    """An invoice object of the API (CSV column names), overdue since 2026-02-04 unless told otherwise."""
    base: dict[str, str | None] = {"invoice_number": number, "customer_email": "zoe@example.com",
                                   "customer_name": "Zoë Martin", "currency": "EUR", "amount_due": "1234.50",
                                   "issued_on": "2026-01-05", "due_on": "2026-02-04"}
    return {**base, **fields}
