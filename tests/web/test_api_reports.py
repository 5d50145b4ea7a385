# ruff: noqa: F811  (fixtures imported from the helpers are redefined as test arguments, as pytest intends)
"""Collection reports and proofs of notice through the HTTP API (``GET /api/v1/reports``, ``GET
/api/v1/evidence/{number}``), both backends: the same numbers as ``oncebeat report --json`` on the hand-computed
book (tests/reports_book.py), the same record as ``oncebeat evidence --json``, every bad parameter named with 400,
and every evidence read audited under the token's name."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable
from datetime import UTC, date, datetime

from api_helpers import READ, api_app  # noqa: F401  (fixtures)
from starlette.testclient import TestClient
from web_helpers import runtime  # noqa: F401  (fixtures)

from oncebeat.provenance import current_source
from oncebeat.reminders.holds import place_hold
from oncebeat.reminders.model import Customer, Invoice
from oncebeat.reminders.notices.evidence import build_evidence
from oncebeat.reminders.reports import EVERY, Month, build_many, report_document
from oncebeat.reminders.runtime import Runtime
from oncebeat.store import redact_url
from oncebeat.timebase import SimulatedClock
from reports_book import seed


def _book(runtime: Runtime) -> None:
    seed(runtime.service, runtime.store)
    runtime.clock = SimulatedClock(datetime(2026, 4, 10, 15, tzinfo=UTC))  # 10:00 in Chicago: as of 2026-04-10


def test_reports_answer_the_hand_computed_figures_as_the_cli_json_does(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    _book(runtime)
    client = api_app()
    answer = client.get("/api/v1/reports?from=2026-01&to=2026-04", headers=READ)
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    body = answer.json()
    assert (body["as_of"], body["from"], body["to"], body["currency"]) == ("2026-04-10", "2026-01", "2026-04", None)
    assert [t["report"] for t in body["reports"]] == ["dso", "cei", "stages", "aging", "promises", "disputes"]
    expected = build_many(runtime.store, EVERY, first=Month(2026, 1), last=Month(2026, 4), as_of=date(2026, 4, 10))
    assert body == json.loads(json.dumps(report_document(expected, as_of=date(2026, 4, 10), first=Month(2026, 1),
                                                         last=Month(2026, 4), currency=None)))
    dso = next(t for t in body["reports"] if t["report"] == "dso")
    eur = [r["dso"] for r in dso["rows"] if r["currency"] == "EUR"]
    assert [round(v, 1) if v is not None else None for v in eur] == [22.1, 32.4, 43.4, None]  # 155/7, 227/7, 391/9


def test_one_report_in_one_currency_as_csv(runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    _book(runtime)
    answer = api_app().get("/api/v1/reports?kind=cei&currency=EUR&from=2026-01&to=2026-03&format=csv", headers=READ)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert [r["month"] for r in rows] == ["2026-01", "2026-02", "2026-03"]
    assert {r["currency"] for r in rows} == {"EUR"}


def test_every_bad_parameter_is_named_with_400_and_the_fix(runtime: Runtime,
                                                           api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    for query, field, needle in [
        ("kind=bogus", "kind", "use all or one of dso"),
        ("from=2026-13", "from", "YYYY-MM"),
        ("to=soon", "to", "YYYY-MM"),
        ("from=2026-05&to=2026-01", "from", "after"),
        ("currency=eur", "currency", "three capital letters"),
        ("as_of=yesterday", "as_of", "YYYY-MM-DD"),
        ("format=xml", "format", "json or csv"),
        ("kind=all&format=csv", "format", "one table"),
        ("colour=red", "colour", "unknown parameter"),
    ]:
        answer = client.get(f"/api/v1/reports?{query}", headers=READ)
        assert answer.status_code == 400, (query, answer.text)
        error = answer.json()["error"]
        assert error["problems"][0]["field"] == field, (query, error)
        assert needle in error["message"], (query, error["message"])


NUMBER = "INV-API/7"  # a slash: the number is a path parameter
SECRET_NAME = "Quilla Vantongeren"


def _held_invoice(runtime: Runtime) -> None:
    runtime.service.upsert([Customer(email="quilla@example.com", name=SECRET_NAME, tz="Europe/Lisbon")],
                           [Invoice(number=NUMBER, customer_email="quilla@example.com", currency="EUR",
                                    amount_due=12_345, issued_on=date(2026, 1, 1), due_on=date(2026, 2, 1))])
    place_hold(runtime.store, clock=runtime.clock, zone=runtime.policy.zone, source=current_source("cli"),
               reason="dispute", invoice=NUMBER, customer=None, until=None, note="amount contested")
    runtime.service.scan(occurrence_id=1, business_date=date(2026, 3, 13), source=current_source("cli"))


def test_evidence_is_the_cli_record_and_each_read_is_audited_under_the_token_name(
        runtime: Runtime, api_app: Callable[..., TestClient]) -> None:
    _held_invoice(runtime)
    client = api_app()
    answer = client.get(f"/api/v1/evidence/{NUMBER}", headers=READ)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.headers["x-oncebeat-record-sha256"] == hashlib.sha256(answer.content).hexdigest()
    record = answer.json()
    assert record["invoice"]["number"] == NUMBER and record["customer"]["name"] == SECRET_NAME
    assert [s["state"] for s in record["stages"]] == ["held"]
    assert record["stages"][0]["hold"]["reason"] == "dispute"
    same = build_evidence(runtime.service, NUMBER, database=redact_url(runtime.store.url))
    assert {k: v for k, v in record.items() if k != "generated_at"} == \
        {k: v for k, v in json.loads(same.text).items() if k != "generated_at"}

    pdf = client.get(f"/api/v1/evidence/{NUMBER}?format=pdf", headers=READ)
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert pdf.headers["content-disposition"].startswith("attachment; filename=")

    events = runtime.store.read("events_of_subject", subject=f"invoice:{NUMBER}", limit=10)
    reads = [e for e in events if e["kind"] == "reminders.evidence_read"]
    assert sorted(json.loads(e["detail"])["form"] if isinstance(e["detail"], str) else e["detail"]["form"]
                  for e in reads) == ["json", "pdf"]
    assert all("looker" in json.dumps(e, default=str) for e in reads)  # the read token's name is the operator


def test_evidence_of_an_unknown_invoice_is_404_and_a_bad_format_400(runtime: Runtime,
                                                                     api_app: Callable[..., TestClient]) -> None:
    client = api_app()
    missing = client.get("/api/v1/evidence/NOPE-1", headers=READ)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    _held_invoice(runtime)
    bad = client.get(f"/api/v1/evidence/{NUMBER}?format=docx", headers=READ)
    assert bad.status_code == 400 and bad.json()["error"]["problems"][0]["field"] == "format"
    assert SECRET_NAME not in bad.text
    assert runtime.store.read("events_of_subject", subject="invoice:NOPE-1", limit=5) == []
