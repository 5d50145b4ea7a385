# ruff: noqa: F811  (fixtures imported from web_helpers are redefined as test arguments, as pytest intends)
"""The proof-of-notice download on the invoice page (issue 24 item 6): a logged-in person gets the PDF or the JSON
record, audited as a read of customer data; an anonymous request is sent to the login page and gets none of the
customer's data. Both backends."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import date

from starlette.testclient import TestClient
from web_helpers import dashboard_client, runtime  # noqa: F401  (fixtures)

from oncebeat.provenance import current_source
from oncebeat.reminders.holds import place_hold
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.runtime import Runtime

NUMBER = "INV-W/1"  # a slash: the number is a path parameter
URL = "/reminders/evidence/INV-W/1"
SECRET_NAME = "Zelda Quuxworth"
SECRET_EMAIL = "zelda.q@example.com"


def _seed(runtime: Runtime) -> None:
    """An invoice 40 days overdue, held by a dispute: the scan (the default policy's collapse "next") records its
    first stage held."""
    runtime.service.upsert([Customer(email=SECRET_EMAIL, name=SECRET_NAME, tz="Europe/Lisbon")],
                           [Invoice(number=NUMBER, customer_email=SECRET_EMAIL, currency="EUR", amount_due=98_765,
                                    issued_on=date(2026, 1, 1), due_on=date(2026, 2, 1))])
    source = current_source("cli")
    place_hold(runtime.store, clock=runtime.clock, zone=runtime.policy.zone, source=source, reason="dispute",
               invoice=NUMBER, customer=None, until=None, note="amount contested")
    runtime.service.scan(occurrence_id=1, business_date=date(2026, 3, 13), source=source)


def test_an_anonymous_request_gets_the_login_page_and_no_customer_data(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    _seed(runtime)
    anonymous = dashboard_client(role=None)
    for url in (URL, URL + "?format=json", URL + "?format=pdf"):
        response = anonymous.get(url)
        assert response.status_code in (302, 303, 401), (url, response.status_code)
        assert response.status_code == 401 or response.headers["location"].startswith("/login")
        for secret in (NUMBER, SECRET_NAME, SECRET_EMAIL, "98", "dispute", "%PDF"):
            assert secret not in response.text, (url, secret)
    assert runtime.store.read("events_of_subject", subject=f"invoice:{NUMBER}", limit=5) == []


def test_a_viewer_downloads_the_json_record_and_the_pdf_each_audited(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    _seed(runtime)
    client = dashboard_client()  # a viewer: reads are allowed
    page = client.get("/reminders/invoices/INV-W/1")
    assert page.status_code == 200 and "/reminders/evidence/INV-W/1?format=pdf" in page.text

    response = client.get(URL + "?format=json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["content-disposition"] == 'attachment; filename="evidence-INV-W_1.json"'
    assert response.headers["cache-control"] == "no-store"
    record = json.loads(response.content)
    sha = hashlib.sha256(response.content).hexdigest()
    assert response.headers["x-oncebeat-record-sha256"] == sha
    assert record["schema"] == "oncebeat.evidence/1" and record["invoice"]["number"] == NUMBER
    assert [(s["stage"], s["state"], s["why"]["kind"]) for s in record["stages"]] == [(1, "held", "held")]
    (held,) = record["stages"]
    assert held["hold"]["reason"] == "dispute" and held["hold"]["note"] == "amount contested"
    assert held["provenance"]["reminder_id"] == runtime.store.read("list_reminders")[0]["id"]
    assert held["times"]["created"]["customer"].endswith(("+00:00", "+01:00"))  # Europe/Lisbon

    pdf = client.get(URL)  # PDF by default
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF-")
    assert pdf.headers["content-disposition"] == 'attachment; filename="evidence-INV-W_1.pdf"'

    events = runtime.store.read("events_of_subject", subject=f"invoice:{NUMBER}", limit=5)
    assert [(e["kind"], e["detail"]["form"]) for e in events] == [("reminders.evidence_read", "pdf"),
                                                                  ("reminders.evidence_read", "json")]
    assert events[1]["detail"]["record_sha256"] == sha
    assert all(e["detail"]["operator"]["via"] == "dashboard" and e["source_name"] == "oncebeat web" for e in events)


def test_an_unknown_invoice_or_format_is_a_404_that_says_so(
        runtime: Runtime, dashboard_client: Callable[..., TestClient]) -> None:
    _seed(runtime)
    client = dashboard_client()
    missing = client.get("/reminders/evidence/INV-NOPE")
    assert missing.status_code == 404 and "no invoice" in missing.text and "Traceback" not in missing.text
    bad = client.get(URL + "?format=docx")
    assert bad.status_code == 404 and "format=pdf or format=json" in bad.text
    assert runtime.store.read("events_of_subject", subject=f"invoice:{NUMBER}", limit=5) == []
