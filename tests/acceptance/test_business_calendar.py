"""The business calendar end to end (issue 23 item 3), on both backends: the real clock, worker and SMTP sink on
simulated time; the invariant checker (with its no-send-on-non-business-day rule) judges each run.

US Christmas and Thanksgiving, a subdivision's holiday (DE-BY Epiphany), weekends, stage days counted in business
days, send_zone = "customer" with customers in two zones across their DST changes, a held ladder resuming on the
next business day, a catch-up after downtime across a holiday, the send window, and the preview.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from reminder_harness import Harness, invoice, maildir_sink

from oncebeat.provenance import current_source
from oncebeat.reminders.calendar import calendar_config
from oncebeat.reminders.holds import place_hold, release_holds
from oncebeat.reminders.model import Customer
from oncebeat.reminders.policy import Policy
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

CHICAGO = ZoneInfo("America/Chicago")
HOUR = timedelta(hours=1)
QUARTER = timedelta(minutes=15)
HOLDER = current_source("cli", name="test")


def _local(day: date, hour: int = 0, zone: ZoneInfo = CHICAGO) -> datetime:
    return datetime.combine(day, time(hour), tzinfo=zone).astimezone(UTC)


@contextmanager
def _harness(store: Store, tmp_path: Path, start: datetime, **policy: Any) -> Iterator[Harness]:
    calendar = policy.pop("calendar", {"country": "US"})
    p = Policy(calendar=calendar_config(calendar, source="test"), **policy)
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(start), policy=p)
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def _run(h: Harness, until: datetime, step: timedelta = HOUR) -> None:
    worker = h.new_worker()
    instant = h.clock.now()
    while instant < until:
        instant += step
        h.tick_to(instant)
        worker.drain()


def _dates(h: Harness) -> dict[tuple[str, int], tuple[date, str]]:
    return {(r["number"], r["stage"]): (r["business_date"], r["state"]) for r in h.reminders()}


def _judged(h: Harness) -> None:
    report = check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir)
    assert report.passed, report.to_text()
    assert report.invariants["no-send-on-non-business-day"].checked == len(h.reminders()) > 0
    assert report.summary["duplicates"] == report.summary["lost"] == 0


@pytest.mark.parametrize(("first", "last", "invoices", "expected"), [
    pytest.param(date(2026, 12, 23), date(2026, 12, 30), [("WED", date(2026, 12, 23)), ("XMAS", date(2026, 12, 24))],
                 {("WED", 1): date(2026, 12, 24), ("WED", 2): date(2026, 12, 28),  # the 25th, then the weekend
                  ("XMAS", 1): date(2026, 12, 28), ("XMAS", 2): date(2026, 12, 29)}, id="christmas"),
    pytest.param(date(2026, 11, 24), date(2026, 11, 30), [("TG", date(2026, 11, 25))],
                 {("TG", 1): date(2026, 11, 27), ("TG", 2): date(2026, 11, 30)}, id="thanksgiving"),
])
def test_a_stage_on_a_us_holiday_or_weekend_goes_out_on_the_next_business_day(
        store: Store, tmp_path: Path, first: date, last: date, invoices: list[tuple[str, date]],
        expected: dict[tuple[str, int], date]) -> None:
    with _harness(store, tmp_path, _local(first), stages=(1, 2)) as h:
        h.add_invoices(*(invoice(n, due) for n, due in invoices))
        _run(h, _local(last, 23))
        assert {k: v[0] for k, v in _dates(h).items()} == expected
        assert all(state == "sent" for _, state in _dates(h).values())
        story = h.service.invoice_story(invoices[-1][0])  # the dashboard's and the API's invoice story say why
        assert story is not None
        assert story["reminders"][0]["moved"].startswith("nominal ") and "sent on the next business day" in \
            story["reminders"][0]["moved"]
        assert len(h.messages()) == len(expected)
        for r in h.reminders():  # each left at the send time of a business day
            local = r["sent_at"].astimezone(CHICAGO)
            assert local.time() == time(8, 0) and h.policy.calendar.is_business_day(local.date()), local
        _judged(h)


@pytest.mark.parametrize(("subdivision", "sent_on"), [("BY", date(2026, 1, 7)), (None, date(2026, 1, 6))])
def test_a_subdivision_holiday_moves_the_stage_only_in_that_subdivision(
        store: Store, tmp_path: Path, subdivision: str | None, sent_on: date) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    cal = {"country": "DE"} | ({"subdivision": subdivision} if subdivision else {})
    with _harness(store, tmp_path, _local(date(2026, 1, 5), 0, berlin), stages=(1,), tz="Europe/Berlin",
                  calendar=cal) as h:
        h.add_invoices(invoice("EPI", date(2026, 1, 5)))
        _run(h, _local(date(2026, 1, 8), 23, berlin))
        assert _dates(h) == {("EPI", 1): (sent_on, "sent")}
        _judged(h)


@pytest.mark.parametrize(("stage_days", "third"), [("business", date(2026, 3, 10)), ("calendar", date(2026, 3, 9))])
def test_stage_days_count_business_days_or_calendar_days_past_the_weekend(
        store: Store, tmp_path: Path, stage_days: str, third: date) -> None:
    # due Thursday 5 March: stage 3 is Tuesday in business days (Fri 1, Mon 2, Tue 3), Sunday → Monday in calendar
    with _harness(store, tmp_path, _local(date(2026, 3, 5)), stages=(1, 3),
                  calendar={"stage_days": stage_days}) as h:
        h.add_invoices(invoice("BIZ", date(2026, 3, 5)))
        _run(h, _local(date(2026, 3, 11), 23))
        assert _dates(h) == {("BIZ", 1): (date(2026, 3, 6), "sent"), ("BIZ", 3): (third, "sent")}
        subjects = sorted(m.subject for m in h.messages())  # days past due stay calendar days
        assert any(f"{(third - date(2026, 3, 5)).days} days past due" in s for s in subjects), subjects
        _judged(h)


@pytest.mark.parametrize("due", [date(2026, 10, 22), date(2026, 10, 29)], ids=["eu-dst", "us-dst"])
def test_customers_in_two_zones_get_business_day_sends_at_0800_local_across_dst(
        store: Store, tmp_path: Path, due: date) -> None:
    # Berlin leaves summer time on Sunday 25 October 2026, New York on Sunday 1 November
    zones = ("America/New_York", "Europe/Berlin")
    customers = tuple(Customer(email=f"c{n}@example.test", name=z, locale="en_US", tz=z) for n, z in enumerate(zones))
    start = _local(due, 0, ZoneInfo("Europe/Berlin"))
    with _harness(store, tmp_path, start, stages=(1, 2, 3, 4), send_zone="customer", send_at="08:00") as h:
        h.add_invoices(*(invoice(f"I{n}", due, email=c.email) for n, c in enumerate(customers)), customers=customers)
        _run(h, _local(due + timedelta(days=7), 0, ZoneInfo("America/New_York")), QUARTER)
        fri, mon = due + timedelta(days=1), due + timedelta(days=4)
        expected = {1: fri, 2: mon, 3: mon + timedelta(days=1), 4: mon + timedelta(days=2)}
        fired = {o["id"]: o["fire_at"] for o in h.store.read("list_occurrences", schedule_key=None)}
        rows = h.reminders()
        assert len(rows) == 8
        for r in rows:
            zone = ZoneInfo(zones[int(r["number"][1])])
            local = fired[r["occurrence_id"]].astimezone(zone)
            assert (r["state"], r["business_date"]) == ("sent", expected[r["stage"]]), r
            assert (local.date(), local.time()) == (expected[r["stage"]], time(8, 0)), (r["number"], local)
        _judged(h)


def test_a_broken_promise_resumes_on_the_next_business_day(store: Store, tmp_path: Path) -> None:
    # due Monday 21 Dec; a promise until Thursday 24 resumes Monday 28 (Christmas, then the weekend)
    with _harness(store, tmp_path, _local(date(2026, 12, 21)), stages=(1, 5, 10)) as h:
        h.add_invoices(invoice("PRM", date(2026, 12, 21)))
        hold = place_hold(h.store, clock=h.clock, zone=h.policy.zone, source=HOLDER, reason="promise",
                          invoice="PRM", until=date(2026, 12, 24), calendar=h.policy.calendar)
        assert hold is not None and hold.resumes_on == date(2026, 12, 28)
        _run(h, _local(date(2026, 12, 29), 23))
        assert _dates(h) == {("PRM", 1): (date(2026, 12, 22), "held"), ("PRM", 5): (date(2026, 12, 28), "sent")}
        resumed = [r for r in h.reminders() if r["stage"] == 5][0]
        assert resumed["resumes_hold_id"] == hold.id
        _judged(h)


def test_a_hold_released_before_a_holiday_resumes_on_the_next_business_day(store: Store, tmp_path: Path) -> None:
    with _harness(store, tmp_path, _local(date(2026, 12, 21)), stages=(1, 2)) as h:
        h.add_invoices(invoice("DSP", date(2026, 12, 21)))
        place_hold(h.store, clock=h.clock, zone=h.policy.zone, source=HOLDER, reason="dispute", invoice="DSP")
        _run(h, _local(date(2026, 12, 24), 12))
        (released,) = release_holds(h.store, clock=h.clock, zone=h.policy.zone, source=HOLDER, invoice="DSP",
                                    calendar=h.policy.calendar)
        assert released.resumes_on == date(2026, 12, 28)
        _run(h, _local(date(2026, 12, 29), 23))
        assert _dates(h) == {("DSP", 1): (date(2026, 12, 22), "held"), ("DSP", 2): (date(2026, 12, 23), "held")}
        _judged(h)


@pytest.mark.parametrize("back", [_local(date(2026, 12, 26), 10), _local(date(2026, 12, 28), 10)],
                         ids=["back-on-a-weekend", "back-on-a-business-day"])
def test_catch_up_after_downtime_across_a_holiday(store: Store, tmp_path: Path, back: datetime) -> None:
    # due Tuesday 22 Dec, stages 3 and 4 fall on Christmas and Saturday; the clock is down from the 24th 09:00
    with _harness(store, tmp_path, _local(date(2026, 12, 22)), stages=(3, 4)) as h:
        h.add_invoices(invoice("CU", date(2026, 12, 22)))
        _run(h, _local(date(2026, 12, 24), 9))
        h.clock.set(back)  # the clock comes back: catchup = "latest" runs the newest missed scan within 24 h
        _run(h, _local(date(2026, 12, 30), 23))
        assert _dates(h) == {("CU", 3): (date(2026, 12, 28), "sent"), ("CU", 4): (date(2026, 12, 29), "sent")}
        outcomes = {o["business_date"]: o["outcome"] for o in h.store.read("list_occurrences", schedule_key=None)}
        assert outcomes[back.astimezone(CHICAGO).date()] == "enqueued"  # the caught-up scan ran (and on the
        _judged(h)  # Saturday created nothing)


def test_a_send_outside_the_window_waits_for_it_to_open(store: Store, tmp_path: Path) -> None:
    # the scan runs at 06:00, the window opens at 08:00: the email leaves at 08:00
    with _harness(store, tmp_path, _local(date(2026, 3, 4)), stages=(1,), schedule="0 6 * * *",
                  calendar={"send_window": "08:00-17:00"}) as h:
        h.add_invoices(invoice("WIN", date(2026, 3, 4)))
        _run(h, _local(date(2026, 3, 5), 23), QUARTER)
        (r,) = h.reminders()
        assert (r["state"], r["business_date"]) == ("sent", date(2026, 3, 5))
        assert r["sent_at"].astimezone(CHICAGO).time() == time(8, 0)
        _judged(h)


def test_preview_says_which_stages_the_calendar_moved_and_which_a_hold_keeps(store: Store, tmp_path: Path) -> None:
    with _harness(store, tmp_path, _local(date(2026, 12, 21)), stages=(1,)) as h:
        h.add_invoices(invoice("MOVED", date(2026, 12, 24)), invoice("HELD", date(2026, 12, 24)),
                       invoice("LATE", date(2026, 12, 20)))
        place_hold(h.store, clock=h.clock, zone=h.policy.zone, source=HOLDER, reason="dispute", invoice="HELD")
        assert h.service.preview(date(2026, 12, 25)) == []
        rows = {r["number"]: r for r in h.service.preview(date(2026, 12, 28))}
        assert rows["MOVED"]["moved"] == "nominal 2026-12-25 (Christmas Day (US)), sent on the next business day"
        assert rows["MOVED"]["held"] is None
        assert rows["HELD"]["held"].startswith("held: dispute (hold ")
        assert rows["LATE"]["moved"] is None  # late, but not because of the calendar


def test_an_imported_promise_resumes_on_the_next_business_day(store: Store, tmp_path: Path) -> None:
    from oncebeat.reminders.bulk import BulkOptions
    from oncebeat.reminders.holds import list_holds

    csv = tmp_path / "holds.csv"
    csv.write_text("invoice_number,customer_email,customer_name,currency,amount_due,issued_on,due_on,hold_reason,"
                   "promise_until,hold_note\nIMP-1,ana@example.com,Ana,USD,10.00,2026-11-21,2026-12-21,promise,"
                   "2026-12-24,called\n", encoding="utf-8")
    with _harness(store, tmp_path, _local(date(2026, 12, 21), 9)) as h:
        h.service.import_invoices_csv(csv, BulkOptions(calendar=h.policy.calendar))
        (hold,) = list_holds(h.store)
        assert (hold.promise_until, hold.resumes_on) == (date(2026, 12, 24), date(2026, 12, 28))
