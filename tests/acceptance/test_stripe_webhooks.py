"""Stripe: signed webhook events applied once per event id (replayed, reordered, forged), through the library,
the dashboard's /webhooks/stripe route, and `oncebeat import --stripe`; on both backends."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_data
from reminder_harness import FIRST_FIRE, Harness, maildir_sink
from starlette.testclient import TestClient

from oncebeat.reminders.policy import Policy, write_default_config
from oncebeat.reminders.stripe import StripeWebhooks, WebhookRejected
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock
from oncebeat.web import WebSettings, create_app

FIXTURE = shared_data("stripe_fixtures") / "invoice.json"
SECRET = "whsec_test_secret_for_oncebeat_tests"
SRC = Path(__file__).resolve().parents[2] / "src"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"Stripe fixtures not found at {FIXTURE}")


def unix(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def stripe_invoice(number: str, status: str = "open", **transitions: str) -> dict[str, Any]:
    obj = copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))
    obj.update({"number": number, "status": status, "customer_email": "ana@example.test", "customer_name": "Ana",
                "created": unix("2026-03-01T10:00:00"), "due_date": unix("2026-03-01T10:00:00"),
                "amount_due": 12345})
    obj["status_transitions"] = {**obj["status_transitions"], "finalized_at": unix("2026-03-01T10:00:00"),
                                 **{k: unix(v) for k, v in transitions.items()}}
    return obj


def event(event_id: str, kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"id": event_id, "object": "event", "type": kind, "created": int(time.time()),
                       "api_version": "2024-06-20", "livemode": False, "data": {"object": obj}}).encode()


def sign(payload: bytes, secret: str = SECRET, at: int | None = None) -> str:
    """The Stripe-Signature header Stripe sends: t=<unix>,v1=HMAC-SHA256(secret, "<t>.<payload>")."""
    t = int(time.time()) if at is None else at
    digest = hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


@pytest.fixture
def hooks(store: Store) -> StripeWebhooks:
    store.migrate()
    return StripeWebhooks(store, clock=SimulatedClock(datetime(2026, 3, 2, 12, tzinfo=UTC)), secret=SECRET,
                          tz="America/Chicago")


def status(store: Store, number: str) -> tuple[str, date | None]:
    row = next(r for r in store.read("list_invoices") if r["number"] == number)
    return row["status"], row["paid_on"]


def test_a_signed_finalized_then_paid_event_opens_then_pays_the_invoice(hooks: StripeWebhooks) -> None:
    opened = event("evt_1", "invoice.finalized", stripe_invoice("S-1"))
    assert hooks.handle(opened, sign(opened)).outcome == "applied"
    assert status(hooks.store, "S-1") == ("open", None)
    paid = event("evt_2", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
    assert hooks.handle(paid, sign(paid)).outcome == "applied"
    assert status(hooks.store, "S-1") == ("paid", date(2026, 3, 2))


def test_a_replayed_event_changes_nothing(hooks: StripeWebhooks) -> None:
    paid = event("evt_1", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
    assert hooks.handle(paid, sign(paid)).outcome == "applied"
    before = hooks.store.read("list_invoices")
    again = hooks.handle(paid, sign(paid))
    assert again.outcome == "duplicate"
    assert hooks.store.read("list_invoices") == before
    assert [e["id"] for e in hooks.store.read("list_stripe_events")] == ["evt_1"]


def test_reordered_events_never_move_an_invoice_backwards(hooks: StripeWebhooks) -> None:
    paid = event("evt_2", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
    late_open = event("evt_1", "invoice.finalized", stripe_invoice("S-1"))
    late_void = event("evt_3", "invoice.voided", stripe_invoice("S-1", "void", voided_at="2026-03-02T16:00:00"))
    assert hooks.handle(paid, sign(paid)).outcome == "applied"
    assert hooks.handle(late_open, sign(late_open)).outcome == "stale"
    assert hooks.handle(late_void, sign(late_void)).outcome == "stale"
    assert status(hooks.store, "S-1") == ("paid", date(2026, 3, 2))
    uncollectible = event("evt_4", "invoice.marked_uncollectible",
                          stripe_invoice("S-2", "uncollectible", marked_uncollectible_at="2026-03-02T10:00:00"))
    paid_later = event("evt_5", "invoice.paid", stripe_invoice("S-2", "paid", paid_at="2026-03-03T10:00:00"))
    assert [hooks.handle(e, sign(e)).outcome for e in (uncollectible, paid_later)] == ["applied", "applied"]
    assert status(hooks.store, "S-2") == ("paid", date(2026, 3, 3))


@pytest.mark.parametrize("forgery", ["wrong secret", "tampered body", "expired", "no header"])
def test_a_forged_event_is_rejected_and_nothing_changes(hooks: StripeWebhooks, forgery: str) -> None:
    opened = event("evt_1", "invoice.finalized", stripe_invoice("S-1"))
    hooks.handle(opened, sign(opened))
    paid = event("evt_2", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
    header: str | None = {"wrong secret": sign(paid, "whsec_attacker"), "tampered body": sign(paid),
                          "expired": sign(paid, at=int(time.time()) - 3600), "no header": None}[forgery]
    body = paid.replace(b"S-1", b"S-9") if forgery == "tampered body" else paid
    with pytest.raises(WebhookRejected):
        hooks.handle(body, header)
    assert status(hooks.store, "S-1") == ("open", None)
    assert [e["id"] for e in hooks.store.read("list_stripe_events")] == ["evt_1"]


@pytest.fixture
def client(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", SECRET)
    write_default_config(tmp_path / "oncebeat.toml")
    app = create_app(WebSettings(database_url=db_url, config=tmp_path / "oncebeat.toml", token="t"))
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        yield c


def test_the_web_endpoint_applies_signed_events_and_answers_400_to_forged_ones(client: TestClient,
                                                                              db_url: str) -> None:
    opened = event("evt_1", "invoice.finalized", stripe_invoice("S-1"))
    ok = client.post("/webhooks/stripe", content=opened, headers={"Stripe-Signature": sign(opened)})
    assert ok.status_code == 200 and ok.json()["outcome"] == "applied"
    again = client.post("/webhooks/stripe", content=opened, headers={"Stripe-Signature": sign(opened)})
    assert again.status_code == 200 and again.json()["outcome"] == "duplicate"
    paid = event("evt_2", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
    forged = client.post("/webhooks/stripe", content=paid, headers={"Stripe-Signature": sign(paid, "whsec_x")})
    assert forged.status_code == 400 and "signature" in forged.json()["error"]
    with open_store(db_url) as store:
        assert status(store, "S-1") == ("open", None)
        assert [e["id"] for e in store.read("list_stripe_events")] == ["evt_1"]


def test_the_webhooks_log_lines_carry_no_customer_data(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    """The web process logs at INFO by default: a webhook's line names the event and its outcome, never a customer's
    values (an address the import refused is quoted in the outcome's detail, which goes to Stripe and the table)."""
    caplog.set_level(logging.INFO, logger="oncebeat")  # whatever an earlier test set on it (simulate quiets it)
    refused = stripe_invoice("S-9")
    refused.update({"customer_email": "not-an-address@", "customer_name": "Zoë Private"})
    body = event("evt_9", "invoice.finalized", refused)
    answer = client.post("/webhooks/stripe", content=body, headers={"Stripe-Signature": sign(body)})
    assert answer.status_code == 200 and answer.json()["outcome"] == "invalid"
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records if r.name.startswith("oncebeat"))
    assert "evt_9" in logged and "invalid" in logged
    for value in ("not-an-address", "Zoë", "S-9", "12345", "123.45"):
        assert value not in logged, value


def test_the_web_endpoint_answers_503_without_a_secret(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRIPE_WEBHOOK_SECRET")
    opened = event("evt_1", "invoice.finalized", stripe_invoice("S-1"))
    answer = client.post("/webhooks/stripe", content=opened, headers={"Stripe-Signature": sign(opened)})
    assert answer.status_code == 503 and "STRIPE_WEBHOOK_SECRET" in answer.json()["error"]


def test_a_payment_webhook_just_before_the_send_stops_the_reminder(store: Store, tmp_path: Path) -> None:
    sink = maildir_sink(tmp_path)
    harness = Harness(store=store, sink=sink, clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)))
    try:
        hooks = StripeWebhooks(store, clock=harness.clock, secret=SECRET, tz=Policy().tz)
        opened = event("evt_1", "invoice.finalized", stripe_invoice("S-1"))
        hooks.handle(opened, sign(opened))
        harness.tick_to(FIRST_FIRE)
        worker = harness.new_worker()
        worker.drain(max_batches=1)  # the scan: one pending reminder and its send job
        paid = event("evt_2", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
        assert hooks.handle(paid, sign(paid)).outcome == "applied"
        worker.drain()
        (row,) = harness.reminders()
        assert (row["state"], row["reason"]) == ("skipped", "invoice paid on 2026-03-02")
        assert harness.messages() == []
    finally:
        harness.close()
        sink.stop()


def oncebeat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "oncebeat.cli", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300)


def test_import_stripe_then_a_paid_webhook_then_the_old_export_again_keeps_it_paid(tmp_path: Path,
                                                                                   db_url: str) -> None:
    export = {"object": "list", "data": [stripe_invoice("S-1"), stripe_invoice("S-2"),
                                         json.loads(FIXTURE.read_text(encoding="utf-8"))]}
    (tmp_path / "invoices.json").write_text(json.dumps(export), encoding="utf-8")
    first = oncebeat("import", "--stripe", "invoices.json", "--db", db_url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "invoices: 2, new: 2" in first.stdout and "left out: 1 draft(s)" in first.stderr
    with open_store(db_url) as store:
        hooks = StripeWebhooks(store, clock=SimulatedClock(datetime(2026, 3, 3, tzinfo=UTC)), secret=SECRET,
                               tz="America/Chicago")
        paid = event("evt_1", "invoice.paid", stripe_invoice("S-1", "paid", paid_at="2026-03-02T15:00:00"))
        hooks.handle(paid, sign(paid))
    again = oncebeat("import", "--stripe", "invoices.json", "--db", db_url, cwd=tmp_path)
    assert again.returncode == 0 and "kept paid: 1" in again.stdout, again.stdout + again.stderr
    with open_store(db_url) as store:
        assert status(store, "S-1") == ("paid", date(2026, 3, 2)) and status(store, "S-2") == ("open", None)
