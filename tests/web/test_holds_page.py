# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The invoice page shows its holds; an admin places and releases them (CSRF, operator session, audited); a
viewer or a forged form is refused and changes nothing. Both backends."""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import date

from starlette.testclient import TestClient
from web_helpers import csrf_of, dashboard_client, login, runtime  # noqa: F401  (fixtures)

from oncebeat.reminders.holds import list_holds
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime

PAGE = "/reminders/invoices/INV-H1"


def _seed(runtime: Runtime) -> None:
    runtime.service.upsert([Customer(email="ana@example.com", name="Ana")],
                           [Invoice(number="INV-H1", customer_email="ana@example.com", currency="USD",
                                    amount_due=1000, issued_on=date(2099, 1, 1), due_on=date(2099, 2, 1))])


def _post(client: TestClient, url: str, **data: str) -> tuple[int, str]:
    response = client.post(url, data={"csrf": csrf_of(client.get(PAGE).text), **data})
    return response.status_code, response.text


def test_an_admin_places_and_releases_a_hold_from_the_invoice_page(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    _seed(runtime)
    client = dashboard_client()
    assert "No hold: reminders follow the ladder." in client.get(PAGE).text
    assert _post(client, PAGE + "/hold", reason="manual")[0] == 403  # a viewer: refused, nothing placed
    assert list_holds(runtime.store) == []
    forged = client.post(PAGE + "/hold", data={"csrf": "0" * 64, "reason": "manual"})
    assert forged.status_code in (400, 403) and list_holds(runtime.store) == []

    login(client)
    status, _ = _post(client, PAGE + "/hold", reason="promise", until="2099-03-01", note="pays on the 1st")
    assert status == 303
    (hold,) = list_holds(runtime.store)
    assert (hold.invoice, hold.reason, hold.promise_until) == ("INV-H1", "promise", date(2099, 3, 1))
    assert hold.created_by.startswith("dashboard")
    page = html.unescape(client.get(PAGE).text)
    assert "promise</span> until 2099-03-01 · pays on the 1st" in page and "Release" in page
    [event] = runtime.store.read("events_of_subject", subject=f"hold:{hold.id}", limit=5)
    assert event["kind"] == "reminders.hold_placed" and event["source_name"] == "oncebeat web"

    status, _ = _post(client, f"/reminders/holds/{hold.id}/release", next=PAGE)
    assert status == 303
    (hold,) = list_holds(runtime.store)
    assert hold.released_at is not None and hold.released_by.startswith("dashboard")
    assert "released" in client.get(PAGE).text

    status, _ = _post(client, PAGE + "/hold", reason="dispute", scope="customer")
    assert status == 303
    assert list_holds(runtime.store)[-1].customer == "ana@example.com"


def test_a_bad_hold_form_is_answered_with_the_problem(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    _seed(runtime)
    client = dashboard_client(role="admin")
    status, text = _post(client, PAGE + "/hold", reason="promise")
    assert status == 400 and "--until" in html.unescape(text)
    status, text = _post(client, PAGE + "/hold", reason="promise", until="2099-02-30")
    assert status == 400 and "is not a date YYYY-MM-DD" in html.unescape(text)
    status, text = _post(client, PAGE + "/hold", reason="vacation")
    assert status == 400 and "not one of" in html.unescape(text)
    assert _post(client, "/reminders/invoices/NOPE/hold", reason="manual")[0] == 404
    assert list_holds(runtime.store) == []
