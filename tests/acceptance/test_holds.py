"""Holds (issue 23 item 1): a held invoice gets no reminder; each stage due while held is recorded held with the
hold's id and reason; a broken promise or a released dispute resumes with the next due stage only.

Both backends, the real clock, worker and SMTP sink (aiosmtpd) on simulated time; the invariant checker judges
each run.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.doctor.explain import explain
from oncebeat.provenance import Operator, current_source
from oncebeat.reminders.holds import HoldError, list_holds, place_hold, release_holds
from oncebeat.reminders.model import Customer, Payment
from oncebeat.reminders.policy import Policy
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

DAY = timedelta(days=1)
OPERATOR = current_source("cli", operator=Operator(via="cli", user="alice", terminal=True))


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy())
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def _fire(day: date) -> datetime:
    """08:00 America/Chicago on ``day`` in UTC (CST until 2026-03-08, CDT after)."""
    return datetime(day.year, day.month, day.day, 14 if day < date(2026, 3, 8) else 13, 0, tzinfo=UTC)


def _run_days(h: Harness, first: date, last: date) -> None:
    """Tick the clock just after 08:00 Chicago each day from ``first`` to ``last`` and drain the worker."""
    worker = h.new_worker()
    day = first
    while day <= last:
        h.tick_to(_fire(day) + timedelta(minutes=1))
        worker.drain()
        day += DAY


def _at(h: Harness, day: date, hour: int = 12) -> None:
    """Move the clock to ``hour``:00 Chicago-ish on ``day`` (after that day's scan) without a tick."""
    h.clock.set(_fire(day) + timedelta(hours=hour - 8))


def _hold(h: Harness, **kw: object) -> int:
    held = place_hold(h.store, clock=h.clock, zone=h.policy.zone, source=OPERATOR, **kw)  # type: ignore[arg-type]
    assert held is not None
    return held.id


def _release(h: Harness, **kw: object) -> None:
    release_holds(h.store, clock=h.clock, zone=h.policy.zone, source=OPERATOR, **kw)  # type: ignore[arg-type]


def _by_stage(h: Harness, number: str = "INV-1") -> dict[int, dict]:
    return {int(r["stage"]): r for r in h.reminders() if r["number"] == number}


def _bodies(h: Harness) -> dict[tuple[str, int], str]:
    """(invoice, stage) -> the text part of each delivered message, read from the Maildir."""
    out = {}
    for folder in ("new", "cur"):
        for path in sorted((h.sink.maildir / folder).glob("*")):
            msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            body = msg.get_body(("plain",))
            assert body is not None
            out[(str(msg["X-Oncebeat-Invoice"]), int(str(msg["X-Oncebeat-Stage"])))] = body.get_content()
    return out


def _checked(h: Harness) -> None:
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed, report.to_text()


def test_a_hold_placed_before_a_stage_is_due_records_it_held_and_sends_nothing(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))  # stage 1 due 03-02
    hold_id = _hold(harness, invoice="INV-1", reason="manual", note="customer on holiday")
    _run_days(harness, date(2026, 3, 2), date(2026, 3, 9))
    stages = _by_stage(harness)
    assert sorted(stages) == [1, 7]  # each stage that came due while held is recorded, once
    for r in stages.values():
        assert (r["state"], r["hold_id"]) == ("held", hold_id)
        assert r["reason"] == f"held: manual (hold {hold_id})"
    assert harness.messages() == []
    story = "\n".join(explain(harness.store, "invoice", "INV-1"))
    assert f"created (held: held: manual (hold {hold_id}))" in story
    _checked(harness)


def test_a_hold_after_enqueue_is_rechecked_just_before_sending(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    # The scan runs inside the worker: run it alone (its job), then place the hold before the send job runs.
    harness.tick_to(_fire(date(2026, 3, 2)) + timedelta(minutes=1))
    worker = harness.new_worker()
    assert worker.run_batch() == 1  # the scan job: it enqueues the send job, which has not run
    assert [r["state"] for r in harness.reminders()] == ["pending"]
    hold_id = _hold(harness, invoice="INV-1", reason="dispute")
    worker.drain()
    (r,) = harness.reminders()
    assert (r["state"], r["hold_id"], r["reason"]) == ("held", hold_id, f"held: dispute (hold {hold_id})")
    assert harness.messages() == []
    story = "\n".join(explain(harness.store, "invoice", "INV-1"))  # oncebeat doctor explain invoice INV-1
    assert f"stage 1: held (held: dispute (hold {hold_id}))" in story
    _checked(harness)


def test_a_promise_kept_sends_nothing_more(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    _run_days(harness, date(2026, 3, 2), date(2026, 3, 3))  # stage 1 sent 03-02
    _at(harness, date(2026, 3, 3))
    hold_id = _hold(harness, invoice="INV-1", reason="promise", until=date(2026, 3, 10))
    _run_days(harness, date(2026, 3, 4), date(2026, 3, 9))  # stage 7 (03-08) comes due while held
    _at(harness, date(2026, 3, 9))
    harness.service.apply_payments([Payment(number="INV-1", paid_on=date(2026, 3, 9))])
    _run_days(harness, date(2026, 3, 10), date(2026, 4, 10))
    stages = _by_stage(harness)
    assert {s: r["state"] for s, r in stages.items()} == {1: "sent", 7: "held"}
    assert stages[7]["reason"] == f"held: promise to pay until 2026-03-10 (hold {hold_id})"
    assert len(harness.messages()) == 1
    _checked(harness)


def test_a_broken_promise_resumes_the_next_day_with_the_next_due_stage_saying_it_was_missed(
        harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    _run_days(harness, date(2026, 3, 2), date(2026, 3, 3))
    _at(harness, date(2026, 3, 3))
    hold_id = _hold(harness, invoice="INV-1", reason="promise", until=date(2026, 3, 7))
    _run_days(harness, date(2026, 3, 4), date(2026, 3, 8))  # 03-08: the day after the promise, stage 7 due
    stages = _by_stage(harness)
    assert {s: (r["state"], r["business_date"]) for s, r in stages.items()} == {
        1: ("sent", date(2026, 3, 2)), 7: ("sent", date(2026, 3, 8))}
    assert stages[7]["resumes_hold_id"] == hold_id
    bodies = _bodies(harness)
    assert "You promised to pay this invoice by" in bodies[("INV-1", 7)].replace("\n", " ")
    assert "promised" not in bodies[("INV-1", 1)]
    _checked(harness)


def test_a_promise_broken_after_a_held_stage_resumes_with_the_next_stage_only_in_order(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    _run_days(harness, date(2026, 3, 2), date(2026, 3, 3))
    _at(harness, date(2026, 3, 3))
    hold_id = _hold(harness, invoice="INV-1", reason="promise", until=date(2026, 3, 12))
    _run_days(harness, date(2026, 3, 4), date(2026, 4, 10))
    stages = _by_stage(harness)
    assert {s: (r["state"], r["business_date"]) for s, r in stages.items()} == {
        1: ("sent", date(2026, 3, 2)), 7: ("held", date(2026, 3, 8)),  # held, never sent late
        14: ("sent", date(2026, 3, 15)), 30: ("sent", date(2026, 3, 31))}
    assert stages[14]["resumes_hold_id"] == hold_id and stages[30]["resumes_hold_id"] is None
    bodies = _bodies(harness)
    assert set(bodies) == {("INV-1", 1), ("INV-1", 14), ("INV-1", 30)}
    assert "You promised" in bodies[("INV-1", 14)] and "You promised" not in bodies[("INV-1", 30)]
    _checked(harness)


def test_releasing_a_dispute_resumes_on_the_next_business_day_without_a_promise_line(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    hold_id = _hold(harness, invoice="INV-1", reason="dispute")  # 03-02 07:00 Chicago, before the first scan
    _run_days(harness, date(2026, 3, 2), date(2026, 3, 3))  # stage 1 held
    _at(harness, date(2026, 3, 7), hour=7)  # released before the 03-07 scan: still held that day, resumes 03-08
    _release(harness, invoice="INV-1", note="dispute won")
    _run_days(harness, date(2026, 3, 7), date(2026, 3, 9))
    stages = _by_stage(harness)
    assert {s: r["state"] for s, r in stages.items()} == {1: "held", 7: "sent"}
    assert stages[1]["hold_id"] == hold_id and stages[7]["business_date"] == date(2026, 3, 8)
    assert "promised" not in _bodies(harness)[("INV-1", 7)]
    (hold,) = list_holds(harness.store)
    assert hold.released_by == "cli:alice" and hold.resumes_on == date(2026, 3, 8)
    _checked(harness)


def test_a_customer_hold_holds_every_invoice_of_that_customer_only(harness: Harness) -> None:
    bob = Customer(email="bob@example.com", name="Bob", locale="en_US", tz="")
    ana = Customer(email="ana@example.com", name="Ana Lima", locale="pt_BR", tz="America/Sao_Paulo")
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)), invoice("INV-2", date(2026, 2, 28)),
                         invoice("INV-3", date(2026, 3, 1), email="bob@example.com"), customers=(ana, bob))
    hold_id = _hold(harness, customer="ANA@example.com", reason="manual")
    _run_days(harness, date(2026, 3, 2), date(2026, 3, 2))
    states = {r["number"]: (r["state"], r["hold_id"]) for r in harness.reminders()}
    assert states == {"INV-1": ("held", hold_id), "INV-2": ("held", hold_id), "INV-3": ("sent", None)}
    assert [m.headers["X-Oncebeat-Invoice"] for m in harness.messages()] == ["INV-3"]
    _checked(harness)


def test_bad_holds_are_refused_with_the_fix(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-1", date(2026, 3, 1)))
    _at(harness, date(2026, 3, 3))
    with pytest.raises(HoldError, match="no invoice 'NOPE'"):
        _hold(harness, invoice="NOPE", reason="manual")
    with pytest.raises(HoldError, match="--until"):
        _hold(harness, invoice="INV-1", reason="promise")
    with pytest.raises(HoldError, match="before today"):
        _hold(harness, invoice="INV-1", reason="promise", until=date(2026, 3, 1))
    with pytest.raises(HoldError, match="exactly one"):
        _hold(harness, invoice="INV-1", customer="ana@example.com", reason="manual")
    with pytest.raises(HoldError, match="not one of"):
        _hold(harness, invoice="INV-1", reason="vacation")
    assert list_holds(harness.store) == []
