"""Stripe disputes (issue 23 item 1): ``charge.dispute.created`` places a dispute hold on the invoice the dispute
names and ``charge.dispute.closed`` releases it; signed, applied once per event id and once per dispute. Both
backends, the real worker and SMTP sink."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminder_harness import FIRST_FIRE, Harness, maildir_sink
from test_stripe_webhooks import SECRET, event, sign, stripe_invoice

from oncebeat.reminders.holds import list_holds
from oncebeat.reminders.policy import Policy
from oncebeat.reminders.stripe import StripeWebhooks, dispute_invoice_number
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

DAY = timedelta(days=1)


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy())
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def dispute(dispute_id: str, number: str | None, status: str = "needs_response") -> dict[str, Any]:
    obj: dict[str, Any] = {"id": dispute_id, "object": "dispute", "amount": 12345, "currency": "usd",
                           "reason": "product_not_received", "status": status, "charge": "ch_1"}
    if number is not None:
        obj["metadata"] = {"invoice_number": number}
    return obj


def _day(h: Harness, day: date) -> None:
    fire = FIRST_FIRE + (day - FIRST_FIRE.date()) - (timedelta(hours=1) if day >= date(2026, 3, 8) else
                                                       timedelta(0))
    h.tick_to(fire + timedelta(minutes=1))
    h.new_worker().drain()


def test_a_dispute_holds_the_invoice_until_it_closes_then_the_ladder_resumes_the_next_day(harness: Harness) -> None:
    hooks = StripeWebhooks(harness.store, clock=harness.clock, secret=SECRET, tz=harness.policy.tz)
    opened = event("evt_fin", "invoice.finalized", stripe_invoice("INV-S1"))
    assert hooks.handle(opened, sign(opened)).outcome == "applied"  # due 2026-03-01: stage 1 due 03-02
    created = event("evt_dp_1", "charge.dispute.created", dispute("dp_1", "INV-S1"))
    outcome = hooks.handle(created, sign(created))
    assert (outcome.outcome, outcome.invoice) == ("applied", "INV-S1")
    assert hooks.handle(created, sign(created)).outcome == "duplicate"  # the same event id, replayed
    again = event("evt_dp_1b", "charge.dispute.created", dispute("dp_1", "INV-S1"))  # another event, same dispute
    assert hooks.handle(again, sign(again)).outcome == "duplicate"
    (hold,) = list_holds(harness.store)
    assert (hold.reason, hold.invoice, hold.external_ref, hold.created_by) == ("dispute", "INV-S1", "dp_1", "stripe")

    for day in (date(2026, 3, 2), date(2026, 3, 3)):
        _day(harness, day)
    (r,) = harness.reminders()
    assert (r["stage"], r["state"], r["hold_id"]) == (1, "held", hold.id)
    assert harness.messages() == []

    harness.clock.set(FIRST_FIRE + 4 * DAY)  # 03-06 08:00 Chicago, before that day's scan
    closed = event("evt_dp_2", "charge.dispute.closed", dispute("dp_1", "INV-S1", status="won"))
    assert hooks.handle(closed, sign(closed)).outcome == "applied"
    assert hooks.handle(closed, sign(closed)).outcome == "duplicate"
    (hold,) = list_holds(harness.store)
    assert hold.released_by == "stripe" and hold.resumes_on == date(2026, 3, 7)
    for day in (date(2026, 3, 6), date(2026, 3, 7), date(2026, 3, 8)):
        _day(harness, day)
    states = {int(x["stage"]): (x["state"], x["business_date"]) for x in harness.reminders()}
    assert states == {1: ("held", date(2026, 3, 2)), 7: ("sent", date(2026, 3, 8))}
    report = check_deployment(harness.store, harness.app, harness.policy, maildir=harness.sink.maildir)
    assert report.passed, report.to_text()


def test_a_dispute_without_an_invoice_number_or_of_an_unknown_invoice_is_recorded_and_ignored(
        harness: Harness) -> None:
    hooks = StripeWebhooks(harness.store, clock=harness.clock, secret=SECRET, tz=harness.policy.tz)
    nameless = event("evt_a", "charge.dispute.created", dispute("dp_a", None))
    assert hooks.handle(nameless, sign(nameless)).outcome == "ignored"
    unknown = event("evt_b", "charge.dispute.created", dispute("dp_b", "NOPE-1"))
    outcome = hooks.handle(unknown, sign(unknown))
    assert outcome.outcome == "ignored" and "no invoice 'NOPE-1'" in outcome.detail
    closed = event("evt_c", "charge.dispute.closed", dispute("dp_z", "NOPE-1", status="lost"))
    assert hooks.handle(closed, sign(closed)).outcome == "ignored"
    not_a_dispute = event("evt_d", "charge.dispute.created", {"object": "charge", "id": "ch_1"})
    assert hooks.handle(not_a_dispute, sign(not_a_dispute)).outcome == "invalid"
    assert list_holds(harness.store) == []


def test_the_invoice_number_is_read_from_the_dispute_or_its_expanded_charge() -> None:
    assert dispute_invoice_number({"metadata": {"invoice_number": "A-1"}}) == "A-1"
    assert dispute_invoice_number({"charge": {"invoice": {"number": "B-2"}}}) == "B-2"
    assert dispute_invoice_number({"charge": {"metadata": {"invoice_number": "C-3"}}}) == "C-3"
    assert dispute_invoice_number({"charge": "ch_1", "metadata": {}}) is None
    assert dispute_invoice_number({"metadata": {"invoice_number": "bad\\nline\n"}}) is None
