"""Stage order after an outage: `collapse = "next"` walks the ladder in order, `"highest"` jumps to the top.

Both backends, the real clock, worker and SMTP sink on simulated time; the invariant checker judges each run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

import pytest
from reminder_harness import FIRST_FIRE, Harness, invoice, maildir_sink

from oncebeat.reminders.model import superseded_stages
from oncebeat.reminders.policy import Policy, stages_due
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

DAY = timedelta(days=1)
OUTAGE = (date(2026, 3, 3), date(2026, 3, 20))  # no clock, no scan on these local days (inclusive)


@contextmanager
def _harness(store: Store, tmp_path: Path, collapse: str) -> Iterator[Harness]:
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(FIRST_FIRE - timedelta(hours=1)),
                policy=Policy(collapse=collapse))
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


@pytest.fixture(params=["next", "highest"])
def harness(request: pytest.FixtureRequest, store: Store, tmp_path: Path) -> Iterator[Harness]:
    with _harness(store, tmp_path, request.param) as h:
        yield h


@pytest.fixture
def next_harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    with _harness(store, tmp_path, "next") as h:
        yield h


@pytest.fixture
def highest_harness(store: Store, tmp_path: Path) -> Iterator[Harness]:
    with _harness(store, tmp_path, "highest") as h:
        yield h


def _run_days(h: Harness, last: date, *, outage: tuple[date, date] | None = None) -> None:
    """Tick the clock at 08:00 Chicago each day from the first fire to ``last``, skipping an outage."""
    day, fire = FIRST_FIRE.date(), FIRST_FIRE
    worker = h.new_worker()
    while day <= last:
        if outage is None or not outage[0] <= day <= outage[1]:
            h.tick_to(fire + timedelta(minutes=1))
            worker.drain()
        day, fire = day + DAY, fire + DAY  # Chicago stays on CST until 2026-03-08; DST moves the fire an hour
        if day == date(2026, 3, 8):
            fire -= timedelta(hours=1)


def _sent(h: Harness) -> list[tuple[int, date]]:
    return sorted((r["stage"], r["business_date"]) for r in h.reminders() if r["state"] == "sent")


def test_after_an_outage_next_sends_the_lowest_stage_and_keeps_the_gaps(next_harness: Harness) -> None:
    harness = next_harness
    harness.add_invoices(invoice("INV-1", date(2026, 2, 25)))  # 5 days past due at the first scan
    _run_days(harness, date(2026, 4, 15), outage=OUTAGE)
    assert _sent(harness) == [(1, date(2026, 3, 2)),    # first contact: the first notice
                              (7, date(2026, 3, 21)),   # the day the clock came back (due since 03-04)
                              (14, date(2026, 3, 28)),  # 7 days after stage 7, the ladder's own gap
                              (30, date(2026, 4, 13))]  # 16 days after stage 14
    assert [r["state"] for r in harness.reminders()] == ["sent"] * 4  # nothing superseded
    assert len(harness.messages()) == 4
    assert check_deployment(harness.store, harness.app, harness.policy, maildir=harness.sink.maildir).passed


def test_after_an_outage_highest_sends_the_top_stage_and_records_the_lower_skipped(highest_harness: Harness) -> None:
    harness = highest_harness
    harness.add_invoices(invoice("INV-1", date(2026, 2, 25)))
    _run_days(harness, date(2026, 4, 15), outage=OUTAGE)
    assert _sent(harness) == [(1, date(2026, 3, 2)), (14, date(2026, 3, 21)), (30, date(2026, 3, 27))]
    assert [r for r in harness.reminders() if r["state"] == "skipped"] == []  # no row per superseded stage
    (top,) = [r for r in harness.reminders() if r["stage"] == 14]
    assert superseded_stages(top) == [7]  # stage 7 recorded superseded in stage 14's row: never sent
    assert 7 not in [int(m.headers["X-Oncebeat-Stage"]) for m in harness.messages()]
    assert check_deployment(harness.store, harness.app, harness.policy, maildir=harness.sink.maildir).passed


def test_a_late_import_never_makes_the_final_notice_the_first_contact_under_next(harness: Harness) -> None:
    harness.add_invoices(invoice("INV-OLD", date(2026, 1, 10)))  # 51 days past due when first seen
    _run_days(harness, date(2026, 4, 10))
    sent = _sent(harness)
    if harness.policy.collapse == "highest":
        assert sent == [(30, date(2026, 3, 2))]
        return
    assert sent == [(1, date(2026, 3, 2)), (7, date(2026, 3, 8)), (14, date(2026, 3, 15)), (30, date(2026, 3, 31))]
    assert sorted(int(m.headers["X-Oncebeat-Stage"]) for m in harness.messages()) == [1, 7, 14, 30]


def test_never_two_stages_of_one_invoice_in_one_run_whatever_the_collapse(harness: Harness) -> None:
    harness.add_invoices(*(invoice(f"INV-{n}", date(2026, 3, 1) - n * DAY) for n in range(0, 60, 3)))
    _run_days(harness, date(2026, 4, 20), outage=OUTAGE)
    per_run: dict[tuple[str, date], int] = {}
    for r in harness.reminders():
        if r["state"] != "skipped":
            key = (r["number"], r["business_date"])
            per_run[key] = per_run.get(key, 0) + 1
    assert max(per_run.values()) == 1
    assert check_deployment(harness.store, harness.app, harness.policy, maildir=harness.sink.maildir).passed


def test_a_courtesy_note_never_goes_out_once_the_invoice_is_overdue() -> None:
    ladder = [-3, 1, 7]
    assert stages_due(ladder, date(2026, 3, 10), date(2026, 3, 7), "next", []) == [-3]
    assert stages_due(ladder, date(2026, 3, 10), date(2026, 3, 12), "next", []) == [1]
    assert stages_due(ladder, date(2026, 3, 10), date(2026, 3, 10), "next", []) == [-3]  # due today: still courteous


def test_the_next_stage_waits_for_its_own_day_and_for_the_gap_after_the_previous_one() -> None:
    ladder = [1, 7, 14, 30]
    due = date(2026, 3, 1)
    assert stages_due(ladder, due, date(2026, 3, 7), "next", [(1, date(2026, 3, 2))]) == []  # offset not reached
    assert stages_due(ladder, due, date(2026, 3, 8), "next", [(1, date(2026, 3, 2))]) == [7]
    assert stages_due(ladder, due, date(2026, 3, 20), "next", [(1, date(2026, 3, 15))]) == []  # gap 6 days
    assert stages_due(ladder, due, date(2026, 3, 21), "next", [(1, date(2026, 3, 15))]) == [7]
    assert stages_due(ladder, due, date(2026, 5, 1), "next", [(30, date(2026, 3, 31))]) == []  # ladder done
    assert stages_due(ladder, due, date(2026, 3, 20), "highest", []) == [1, 7, 14]
    assert stages_due(ladder, due, date(2026, 3, 20), "highest", [(1, date(2026, 3, 2))]) == [7, 14]
    assert stages_due(ladder, due, date(2026, 4, 20), "highest", [(14, date(2026, 3, 20))]) == [30]  # never back
