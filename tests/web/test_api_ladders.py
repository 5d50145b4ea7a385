# ruff: noqa: F811  (fixtures imported from the helpers are redefined as test arguments, as pytest intends)
"""Ladders in the HTTP API (issue 23 item 2): ``GET /api/v1/ladders``, ``GET /api/v1/ladders/{name}`` and
``POST /api/v1/ladders/{name}/apply`` on both backends: rules, versions and the invoices each holds; the apply is a
keyed write (replayed once), audited, needs the write scope, and moves nothing when the confirmed count is stale."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from api_helpers import READ, api_app, write_headers  # noqa: F401  (fixture)
from starlette.testclient import TestClient

from oncebeat import audit
from oncebeat.provenance import current_source
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime, load_runtime

TOML = """[reminders]
stages = [1, 7, 14, 30]

[[ladders]]
name = "vip"
match = { country = ["US", "CA"], tags_any = "vip" }
stages = [2, 9]

[[ladders]]
name = "eur"
match = { currency = "EUR" }
stages = [3, 10]
"""
DUE = date(2026, 3, 2)


def _book(rt: Runtime) -> None:
    def inv(number: str, currency: str, email: str = "ana@example.test") -> Invoice:
        return Invoice(number=number, customer_email=email, currency=currency, amount_due=10_000,
                       issued_on=DUE - timedelta(days=30), due_on=DUE)

    rt.service.upsert([Customer(email="ana@example.test", name="Ana"),
                       Customer(email="vip@example.test", name="Vi", country="US", tags="vip")],
                      [inv("EUR-1", "EUR"), inv("EUR-2", "EUR"), inv("USD-1", "USD"),
                       inv("VIP-1", "EUR", "vip@example.test")])
    rt.service.scan(occurrence_id=1, business_date=DUE + timedelta(days=4), source=current_source("clock"))


@pytest.fixture
def runtime(db_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """Invoices booked and pinned under TOML, then the file edited (ladder eur's stages): the runtime reads the
    edited file, as `oncebeat web` restarted after the edit does."""
    config = tmp_path / "oncebeat.toml"
    config.write_text(TOML, encoding="utf-8")
    first = load_runtime(database_url=db_url, config=config)
    try:
        _book(first)
    finally:
        first.close()
    config.write_text(TOML.replace("stages = [3, 10]", "stages = [3, 12]"), encoding="utf-8")
    rt = load_runtime(database_url=db_url, config=config)
    try:
        yield rt
    finally:
        rt.close()


def test_the_ladders_are_listed_with_rules_versions_open_invoices_and_the_pending_apply(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    assert client.get("/api/v1/ladders").status_code == 401
    answer = client.get("/api/v1/ladders", headers=READ)
    assert answer.status_code == 200, answer.text
    ladders = {entry["name"]: entry for entry in answer.json()["ladders"]}
    assert list(ladders) == ["vip", "eur", "default"]
    assert ladders["vip"]["match"] == {"country": ["US", "CA"], "tags_any": ["vip"]}
    assert ladders["vip"]["rule"] == "country US/CA, tagged vip"
    assert ladders["vip"]["open_invoices"] == 1 and ladders["vip"]["apply"]["total"] == 0
    eur = ladders["eur"]
    assert eur["settings"]["stages"] == [3, 12]  # the file's
    assert [(v["version"], v["open_invoices"], v["current"]) for v in eur["versions"]] == [(1, 2, False)]
    assert eur["apply"] == {"to_version": 2, "recorded": False, "moves": {"1": 2}, "total": 2}
    assert ladders["default"]["match"] is None
    one = client.get("/api/v1/ladders/eur", headers=READ).json()["ladder"]
    assert [(i["number"], i["version"], i["status"]) for i in one["invoices"]] == [("EUR-1", 1, "open"),
                                                                                  ("EUR-2", 1, "open")]
    assert one["invoices_truncated"] is False
    assert client.get("/api/v1/ladders/nope", headers=READ).status_code == 404
    assert client.get("/api/v1/ladders?x=1", headers=READ).status_code == 400


def test_apply_moves_the_open_invoices_once_audited_and_a_stale_count_moves_nothing(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    assert client.post("/api/v1/ladders/eur/apply", json={"expected": 2}, headers=READ).status_code == 403
    stale = client.post("/api/v1/ladders/eur/apply", json={"expected": 5}, headers=write_headers())
    assert stale.status_code == 409 and stale.json()["error"]["type"] == "count_changed"
    assert "2 open invoice(s) would move now, not the 5 confirmed" in stale.json()["error"]["message"]
    assert [v["version"] for v in client.get("/api/v1/ladders/eur", headers=READ).json()["ladder"]["versions"]] == [1]

    bad = client.post("/api/v1/ladders/eur/apply", json={"expected": -1, "x": 1}, headers=write_headers())
    assert bad.status_code == 422
    assert {p["pointer"] for p in bad.json()["error"]["problems"]} == {"/expected", "/x"}
    assert client.post("/api/v1/ladders/nope/apply", headers=write_headers()).status_code == 404

    headers = write_headers("apply-eur-1")
    done = client.post("/api/v1/ladders/eur/apply", json={"expected": 2}, headers=headers)
    assert done.status_code == 200, done.text
    assert done.json() == {"ladder": "eur", "version": 2, "moved": 2, "from_versions": {"1": 2}}
    again = client.post("/api/v1/ladders/eur/apply", json={"expected": 2}, headers=headers)
    assert again.status_code == 200 and again.json() == done.json()
    assert again.headers["idempotent-replayed"] == "true"
    eur = client.get("/api/v1/ladders/eur", headers=READ).json()["ladder"]
    assert [(v["version"], v["open_invoices"], v["current"]) for v in eur["versions"]] == [(1, 0, False),
                                                                                         (2, 2, True)]
    assert eur["apply"]["total"] == 0
    applied = audit.list_events(runtime.store, since=datetime(1970, 1, 1, tzinfo=UTC), kind="ladders.applied")
    assert len(applied) == 1 and applied[0]["source_kind"] == "api"
    assert applied[0]["detail"]["operator"]["user"] == "billing" and applied[0]["detail"]["moved"] == 2
    # Nothing left to move: an unkeyed-body apply is a no-op, still audited.
    assert client.post("/api/v1/ladders/eur/apply", headers=write_headers()).json()["moved"] == 0
