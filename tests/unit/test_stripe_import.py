"""Reading Stripe invoice exports: list responses and JSON lines, Stripe's units and Unix times."""

from __future__ import annotations

import copy
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_data

from oncebeat.reminders.stripe import read_stripe_invoices, stripe_minor_to_iso

FIXTURE = shared_data("stripe_fixtures") / "invoice.json"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(), reason=f"Stripe fixtures not found at {FIXTURE}")


def unix(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def stripe_invoice(number: str, **changes: Any) -> dict[str, Any]:
    """Stripe's own invoice fixture (shape and types), finalized and given a number and customer."""
    obj = copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))
    obj.update({"number": number, "status": "open", "customer_email": "ana@example.test", "customer_name": "Ana",
                "created": unix("2026-01-05T10:00:00"), "due_date": unix("2026-02-04T10:00:00")})
    obj["status_transitions"] = {**obj["status_transitions"], "finalized_at": unix("2026-01-05T10:00:00")}
    transitions = changes.pop("status_transitions", {})
    obj.update(changes)
    obj["status_transitions"].update(transitions)
    return obj


def test_an_api_list_response_and_json_lines_give_the_same_invoices(tmp_path: Path) -> None:
    objects = [stripe_invoice("A-1"), stripe_invoice("A-2", currency="jpy", amount_due=5000)]
    (tmp_path / "list.json").write_text(json.dumps({"object": "list", "data": objects, "has_more": False}))
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps(o) for o in objects) + "\n")
    from_list = read_stripe_invoices(tmp_path / "list.json", tz="UTC").data
    from_lines = read_stripe_invoices(tmp_path / "lines.jsonl", tz="UTC").data
    assert from_list.problems == [] and from_list.invoices == from_lines.invoices
    usd, jpy = from_list.invoices
    assert (usd.currency, usd.amount_due, usd.issued_on, usd.due_on) == ("USD", 1000, date(2026, 1, 5),
                                                                        date(2026, 2, 4))
    assert (jpy.currency, jpy.amount_due) == ("JPY", 5000)  # zero-decimal: 5000 yen, not 50.00
    assert from_list.customers[0].email == "ana@example.test"


@pytest.mark.parametrize(("currency", "stripe_amount", "iso_minor"), [
    ("USD", 1050, 1050), ("JPY", 5000, 5000), ("KRW", 12000, 12000), ("BHD", 5120, 5120), ("ISK", 50000, 500),
    # ISO 4217 keeps a minor unit where CLDR shows none: Stripe's HUF 849150 is HUF 8,491.50, never refused.
    ("HUF", 849150, 849150), ("TWD", 12345, 12345), ("IDR", 1500050, 1500050), ("COP", 990001, 990001),
    ("MGA", 5000, 500000), ("IQD", 1234, 12340), ("KWD", 12340, 12340), ("UGX", 5000, 5000),
])
def test_stripe_minor_units_become_iso_minor_units(currency: str, stripe_amount: int, iso_minor: int) -> None:
    assert stripe_minor_to_iso(stripe_amount, currency) == (iso_minor, None)


def test_an_isk_amount_with_a_fraction_of_a_krona_is_refused() -> None:
    amount, reason = stripe_minor_to_iso(50050, "ISK")
    assert amount is None and reason is not None and "fraction" in reason


def test_unix_times_become_dates_in_the_business_zone(tmp_path: Path) -> None:
    late_evening_utc = unix("2026-01-05T03:00:00")  # still 4 January in Chicago
    (tmp_path / "i.json").write_text(json.dumps([stripe_invoice("A-1", created=late_evening_utc)]))
    (invoice,) = read_stripe_invoices(tmp_path / "i.json", tz="America/Chicago").data.invoices
    assert invoice.issued_on == date(2026, 1, 4)


def test_statuses_map_with_their_transition_dates_and_drafts_and_free_invoices_are_left_out(tmp_path: Path) -> None:
    objects = [
        stripe_invoice("P-1", status="paid", status_transitions={"paid_at": unix("2026-01-20T12:00:00")}),
        stripe_invoice("V-1", status="void", status_transitions={"voided_at": unix("2026-01-21T12:00:00")}),
        stripe_invoice("U-1", status="uncollectible",
                       status_transitions={"marked_uncollectible_at": unix("2026-01-22T12:00:00")}),
        json.loads(FIXTURE.read_text(encoding="utf-8")),  # Stripe's fixture itself is a draft
        stripe_invoice("Z-1", amount_due=0),
    ]
    (tmp_path / "i.json").write_text(json.dumps({"object": "list", "data": objects}))
    found = read_stripe_invoices(tmp_path / "i.json", tz="UTC")
    assert found.data.problems == [] and (found.drafts, found.nothing_due) == (1, 1)
    paid, void, uncollectible = found.data.invoices
    assert (paid.status, paid.paid_on, paid.status_on) == ("paid", date(2026, 1, 20), date(2026, 1, 20))
    assert (void.status, void.status_on) == ("void", date(2026, 1, 21))
    assert (uncollectible.status, uncollectible.status_on) == ("uncollectible", date(2026, 1, 22))


def test_each_unusable_invoice_is_reported_with_its_position_and_field(tmp_path: Path) -> None:
    objects = [stripe_invoice("E-1", customer_email=None), stripe_invoice("E-2", currency="xts"),
               stripe_invoice("E-3", due_date=None), stripe_invoice("E-4", status="paid"),
               stripe_invoice("E-1")]
    (tmp_path / "i.jsonl").write_text("\n".join(json.dumps(o) for o in objects) + "\nnot json\n")
    data = read_stripe_invoices(tmp_path / "i.jsonl", tz="UTC").data
    text = [str(p) for p in data.problems]
    assert any(t.startswith("i.jsonl:1: column customer_email") for t in text)
    assert any(t.startswith("i.jsonl:2: column currency: 'xts'") and "not legal tender" in t for t in text)
    assert any(t.startswith("i.jsonl:3: column due_date") and "--due-days" in t for t in text)
    assert any(t.startswith("i.jsonl:4: column status_transitions.paid_at") for t in text)
    assert any(t.startswith("i.jsonl:6:") and "not a JSON object" in t for t in text)
    assert [i.number for i in data.invoices] == ["E-1"]  # line 5 reuses E-1 after line 1 was refused
    with_terms = read_stripe_invoices(tmp_path / "i.jsonl", tz="UTC", due_days=30).data
    assert "E-3" in {i.number for i in with_terms.invoices}


def test_stripe_texts_follow_the_csv_limits_and_refuse_format_characters(tmp_path: Path) -> None:
    """Issue 21 item 10: the same rules at every source (the webhook converts with the same function)."""
    from oncebeat.reminders.stripe import invoice_from_stripe

    _, invoice, problems = invoice_from_stripe(stripe_invoice("N" * 100_000), tz="UTC")
    assert invoice is None
    (field, value, reason) = problems[0]
    assert (field, value) == ("number", None) and reason.startswith("is 100,000 characters long")
    _, invoice, problems = invoice_from_stripe(stripe_invoice("S-1", customer_name="Ana \u202egnp.exe"), tz="UTC")
    assert invoice is None and problems[0][0] == "customer_name" and "U+202E" in problems[0][2]
    customer, invoice, problems = invoice_from_stripe(stripe_invoice("S-2", customer_name="Mohammad\u200cReza"),
                                                      tz="UTC")
    assert problems == [] and customer is not None and customer.name == "Mohammad\u200cReza"


def test_the_hosted_invoice_page_is_the_pay_now_link_and_only_an_https_one(tmp_path: Path) -> None:
    objects = [stripe_invoice("P-1", hosted_invoice_url="https://invoice.stripe.com/i/acct_1/test_abc"),
               stripe_invoice("P-2", hosted_invoice_url=None), stripe_invoice("P-3", hosted_invoice_url="http://x.test/")]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(o) for o in objects) + "\n")
    data = read_stripe_invoices(tmp_path / "p.jsonl", tz="UTC").data
    assert [(i.number, i.payment_url) for i in data.invoices] == [
        ("P-1", "https://invoice.stripe.com/i/acct_1/test_abc"), ("P-2", None)]  # None: a stored link is kept
    assert any("hosted_invoice_url" in str(p) and "https" in str(p) for p in data.problems)
