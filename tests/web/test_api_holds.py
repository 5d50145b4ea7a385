# ruff: noqa: F811  (fixtures imported from the helpers are redefined as test arguments, as pytest intends)
"""Holds through the HTTP API (issues 23 item 1 and 25 item 2), on both backends through the real application:
placed on an invoice or a customer, a promise with its date, a retried request and a repeated external_ref each
placing one hold, every problem named by its JSON pointer with nothing applied, a held invoice's stage recorded
held by the real scan, release by selector, and the listing by business date."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api_helpers import READ, api_app, invoice, write_headers  # noqa: F401  (fixtures)
from starlette.testclient import TestClient
from web_helpers import runtime  # noqa: F401  (fixtures)

from oncebeat import audit
from oncebeat.clock import ClockProcess
from oncebeat.reminders.runtime import Runtime
from oncebeat.worker import Worker

H = write_headers


def count(rt: Runtime, sql: str) -> int:
    """One number from the database (the test looks inside; the code under test never runs this)."""
    with rt.store.transaction() as tx:
        return int(tx.execute(sql)[0]["n"])


def _book(client: TestClient) -> None:
    body = {"invoices": [invoice("INV-1"), invoice("INV-2"),
                         invoice("INV-3", customer_email="max@example.com", customer_name="Max Müller")]}
    assert client.post("/api/v1/invoices", json=body, headers=H()).status_code == 200


def _scan(rt: Runtime) -> None:
    clock = ClockProcess(rt.app, rt.store, clock=rt.clock)
    clock.sync()
    clock.trigger("reminders")
    Worker(rt.app, rt.store, clock=rt.clock).drain(max_batches=1)


def _states(rt: Runtime) -> dict[str, str]:
    with rt.store.transaction() as tx:
        rows = tx.execute("SELECT i.number, r.state FROM reminders r JOIN invoices i ON i.id = r.invoice_id")
    return {r["number"]: r["state"] for r in rows}


def test_a_hold_placed_through_the_api_holds_the_stage_and_a_retry_places_one(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    _book(client)
    body = {"invoice_number": "INV-1", "reason": "dispute", "note": "Wrong quantity on line 2"}
    first = client.post("/api/v1/holds", json=body, headers=H("hold-1"))
    assert first.status_code == 201, first.text
    hold: dict[str, Any] = first.json()["hold"]
    assert first.json()["placed"] is True
    assert hold["invoice"] == "INV-1" and hold["customer"] is None and hold["reason"] == "dispute"
    assert hold["created_by"] == "api:billing" and hold["released_at"] is None
    again = client.post("/api/v1/holds", json=body, headers=H("hold-1"))
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert count(runtime, "SELECT COUNT(*) AS n FROM reminder_holds") == 1
    kinds = [e["kind"] for e in audit.events_of(runtime.store, f"hold:{hold['id']}")]
    assert kinds == ["reminders.hold_placed"]
    _scan(runtime)
    assert _states(runtime) == {"INV-1": "held", "INV-2": "pending", "INV-3": "pending"}
    read = client.get(f"/api/v1/holds/{hold['id']}", headers=READ)
    assert read.status_code == 200 and read.json()["hold"] == hold
    held = client.get("/api/v1/reminders?state=held", headers=READ)
    assert held.status_code == 200 and [r["number"] for r in held.json()["reminders"]] == ["INV-1"]


def test_an_external_ref_places_one_hold_however_often_it_is_sent(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    _book(client)
    body = {"customer_email": "max@example.com", "reason": "dispute", "external_ref": "dp_1Q2w3E"}
    first = client.post("/api/v1/holds", json=body, headers=H())
    second = client.post("/api/v1/holds", json=body, headers=H())  # another key: a second delivery of the event
    assert first.status_code == 201 and second.status_code == 200
    assert second.json() == {"hold": first.json()["hold"], "placed": False}
    assert count(runtime, "SELECT COUNT(*) AS n FROM reminder_holds") == 1
    released = client.post("/api/v1/holds/release", json={"external_ref": "dp_1Q2w3E", "note": "won"}, headers=H())
    assert released.status_code == 200
    [gone] = released.json()["released"]
    assert gone["id"] == first.json()["hold"]["id"] and gone["release_note"] == "won"
    assert gone["resumes_on"] is not None
    replay = client.post("/api/v1/holds/release", json={"external_ref": "dp_1Q2w3E"}, headers=H())
    assert replay.status_code == 200 and replay.json() == {"released": []}
    # An external_ref no hold was placed with is refused as an unknown invoice is: 422 naming the field.
    for field, value in (("external_ref", "dp_typo"), ("invoice_number", "INV-404"),
                         ("customer_email", "nobody@example.com")):
        unknown = client.post("/api/v1/holds/release", json={field: value}, headers=H())
        assert unknown.status_code == 422, (field, unknown.text)
        [problem] = unknown.json()["error"]["problems"]
        assert problem["pointer"] == f"/{field}" and value in problem["message"], (field, problem)


def test_a_promise_needs_its_date_and_every_problem_is_named_with_nothing_applied(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    _book(client)
    cases: list[tuple[Any, set[str]]] = [
        ({"invoice_number": "INV-1", "reason": "promise"}, {"/until"}),
        ({"invoice_number": "INV-1", "reason": "promise", "until": "2020-01-01"}, {"/until"}),
        ({"invoice_number": "INV-1", "reason": "promise", "until": "next friday"}, {"/until"}),
        ({"invoice_number": "INV-1", "reason": "dispute", "until": "2099-01-01"}, {"/until"}),
        ({"invoice_number": "INV-1", "reason": "vacation", "colour": "red"}, {"/reason", "/colour"}),
        ({"invoice_number": "INV-1", "customer_email": "zoe@example.com", "reason": "manual"}, {""}),
        ({"reason": "manual"}, {""}),
        ({"invoice_number": "INV-404", "reason": "manual"}, {"/invoice_number"}),
        ({"customer_email": "nobody@example.com", "reason": "manual"}, {"/customer_email"}),
        ({"invoice_number": "INV-1", "reason": "manual", "note": "line\r\nBcc: x@evil.test"}, {"/note"}),
        (["INV-1"], {""}),
    ]
    for body, pointers in cases:
        answer = client.post("/api/v1/holds", json=body, headers=H())
        assert answer.status_code == 422, (body, answer.text)
        assert {p["pointer"] for p in answer.json()["error"]["problems"]} == pointers, (body, answer.text)
    assert count(runtime, "SELECT COUNT(*) AS n FROM reminder_holds") == 0
    promise = client.post("/api/v1/holds", json={"invoice_number": "INV-2", "reason": "promise",
                                                 "until": "2099-03-20"}, headers=H())
    assert promise.status_code == 201
    assert promise.json()["hold"]["promise_until"] == "2099-03-20"
    assert promise.json()["hold"]["resumes_on"] == "2099-03-21"


def test_release_takes_exactly_one_selector_and_the_list_filters_by_business_date(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    _book(client)
    a = client.post("/api/v1/holds", json={"invoice_number": "INV-1", "reason": "manual"}, headers=H()).json()
    b = client.post("/api/v1/holds", json={"customer_email": "max@example.com", "reason": "dispute"},
                    headers=H()).json()
    for body in ({}, {"hold_id": a["hold"]["id"], "invoice_number": "INV-1"}):
        refused = client.post("/api/v1/holds/release", json=body, headers=H())
        assert refused.status_code == 422 and refused.json()["error"]["problems"][0]["pointer"] == ""
    for body, pointer in (({"hold_id": 999999}, "/hold_id"), ({"hold_id": "1"}, "/hold_id"),
                          ({"invoice_number": "INV-404"}, "/invoice_number")):
        refused = client.post("/api/v1/holds/release", json=body, headers=H())
        assert refused.status_code == 422 and refused.json()["error"]["problems"][0]["pointer"] == pointer, body
    listed = client.get("/api/v1/holds?active_on=today", headers=READ).json()["holds"]
    assert [h["id"] for h in listed] == [a["hold"]["id"], b["hold"]["id"]]
    done = client.post("/api/v1/holds/release", json={"hold_id": a["hold"]["id"]}, headers=H())
    assert [h["id"] for h in done.json()["released"]] == [a["hold"]["id"]]
    resumes = done.json()["released"][0]["resumes_on"]
    later = client.get(f"/api/v1/holds?active_on={resumes}", headers=READ).json()["holds"]
    assert [h["id"] for h in later] == [b["hold"]["id"]]
    assert len(client.get("/api/v1/holds", headers=READ).json()["holds"]) == 2
    for query in ("active_on=soon", "colour=red"):
        assert client.get(f"/api/v1/holds?{query}", headers=READ).status_code == 400
    assert client.get("/api/v1/holds/424242", headers=READ).status_code == 404
    read_only = client.post("/api/v1/holds", json={"invoice_number": "INV-1", "reason": "manual"},
                            headers={**READ, "idempotency-key": "k"})
    assert read_only.status_code == 403
