"""Per-customer send time: each reminder at 08:00 on the customer's own calendar, days past due counted there.

`send_zone = "customer"` on both backends, the real clock (every quarter hour), worker and SMTP sink on simulated
time, across each zone's DST dates and in zones with :30 and :45 offsets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from reminder_harness import Harness, invoice, maildir_sink

from oncebeat.errors import ConfigError
from oncebeat.reminders.model import Customer
from oncebeat.reminders.policy import Policy, policy_from_dict
from oncebeat.simulate.standalone import check_deployment
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

QUARTER = timedelta(minutes=15)
LADDER = (1, 2, 3, 4)  # one stage a day, so each local day of the window shows one send


@contextmanager
def _harness(store: Store, tmp_path: Path, start: datetime) -> Iterator[Harness]:
    policy = Policy(stages=LADDER, send_zone="customer", send_at="08:00")
    h = Harness(store=store, sink=maildir_sink(tmp_path), clock=SimulatedClock(start), policy=policy)
    try:
        yield h
    finally:
        h.close()
        h.sink.stop()


def _customer(zone: str) -> Customer:
    slug = zone.lower().replace("/", "-").replace("_", "-")
    return Customer(email=f"{slug}@example.test", name=zone, locale="en_US", tz=zone)


def _run(h: Harness, until: datetime) -> None:
    worker = h.new_worker()
    instant = h.clock.now()
    while instant < until:
        instant += QUARTER
        h.tick_to(instant)
        worker.drain()


def _sends(h: Harness) -> list[tuple[str, int, date, datetime]]:
    """(customer zone, stage, business date, instant of the occurrence that created it) of each sent reminder."""
    fired = {o["id"]: o["fire_at"] for o in h.store.read("list_occurrences", schedule_key=None)}
    zone_of = {i["number"]: i["customer_tz"] for i in h.store.read("list_invoices")}
    return sorted((zone_of[r["number"]], r["stage"], r["business_date"], fired[r["occurrence_id"]])
                  for r in h.reminders() if r["state"] == "sent")


def _assert_each_send_at_0800_local_once_a_day(h: Harness, expected_per_zone: int) -> None:
    sends = _sends(h)
    for zone, stage, business, fire_at in sends:
        local = fire_at.astimezone(ZoneInfo(zone))
        assert (local.date(), local.time()) == (business, time(8, 0)), f"{zone} stage {stage} at {local.isoformat()}"
    per_day = [(zone, business) for zone, _, business, _ in sends]
    assert len(per_day) == len(set(per_day)), "two reminders of one customer on one local day"
    zones = {zone for zone, *_ in sends}
    assert all(sum(1 for z, *_ in sends if z == zone) == expected_per_zone for zone in zones), sends
    subjects = sorted(m.subject for m in h.messages())
    assert len(subjects) == len(sends)
    for stage in LADDER:  # days past due are counted in the customer's zone: stage N goes out N days after due
        label = "day" if stage == 1 else "days"
        assert sum(f"is {stage} {label} past due" in s for s in subjects) == len(zones)
    assert check_deployment(h.store, h.app, h.policy, maildir=h.sink.maildir).passed


@pytest.mark.parametrize(("zone", "transition"), [
    ("America/Los_Angeles", date(2026, 3, 8)), ("America/Los_Angeles", date(2026, 11, 1)),
    ("Europe/Paris", date(2026, 3, 29)), ("Europe/Paris", date(2026, 10, 25)),
    ("Pacific/Auckland", date(2026, 4, 5)), ("Pacific/Auckland", date(2026, 9, 27)),
], ids=lambda v: str(v))
def test_each_reminder_goes_out_at_0800_on_the_customers_calendar_across_dst(
        store: Store, tmp_path: Path, zone: str, transition: date) -> None:
    tz = ZoneInfo(zone)
    first = transition - timedelta(days=1)  # window: the day before the transition to two days after it
    start = datetime.combine(first, time(0, 0), tzinfo=tz).astimezone(UTC)
    end = datetime.combine(first + timedelta(days=4), time(0, 0), tzinfo=tz).astimezone(UTC)
    with _harness(store, tmp_path, start) as h:
        h.add_invoices(invoice("INV-1", first - timedelta(days=1), email=_customer(zone).email),
                       customers=(_customer(zone),))
        _run(h, end)
        _assert_each_send_at_0800_local_once_a_day(h, expected_per_zone=4)
        assert [s[2] for s in _sends(h)] == [first + timedelta(days=n) for n in range(4)]


def test_zones_with_half_and_quarter_hour_offsets_get_their_own_0800(store: Store, tmp_path: Path) -> None:
    zones = ["Asia/Kolkata", "Asia/Kathmandu", "Australia/Eucla", "Pacific/Chatham", "America/St_Johns"]
    first = date(2026, 6, 10)
    start = datetime.combine(first, time(0, 0), tzinfo=ZoneInfo("Pacific/Chatham")).astimezone(UTC)
    end = datetime.combine(first + timedelta(days=4), time(12, 0), tzinfo=ZoneInfo("America/St_Johns"))
    with _harness(store, tmp_path, start) as h:
        customers = tuple(_customer(z) for z in zones)
        h.add_invoices(*(invoice(f"INV-{n}", first - timedelta(days=1), email=c.email)
                         for n, c in enumerate(customers)), customers=customers)
        _run(h, end.astimezone(UTC))
        _assert_each_send_at_0800_local_once_a_day(h, expected_per_zone=4)


def test_a_customer_without_a_zone_is_served_on_the_schedules_calendar(store: Store, tmp_path: Path) -> None:
    start = datetime(2026, 6, 10, 5, 0, tzinfo=UTC)  # 00:00 in Chicago (CDT)
    with _harness(store, tmp_path, start) as h:
        nozone = Customer(email="nozone@example.test", name="No Zone", locale="en_US")
        h.add_invoices(invoice("INV-Z", date(2026, 6, 9), email=nozone.email), customers=(nozone,))
        _run(h, start + timedelta(days=1))
        (sent,) = [r for r in h.reminders() if r["state"] == "sent"]
        fired = {o["id"]: o["fire_at"] for o in h.store.read("list_occurrences", schedule_key=None)}
        assert fired[sent["occurrence_id"]].astimezone(ZoneInfo("America/Chicago")).time() == time(8, 0)


def test_a_late_scan_serves_the_local_date_of_its_occurrence_not_of_the_moment_it_ran(
        store: Store, tmp_path: Path) -> None:
    tokyo = _customer("Asia/Tokyo")
    start = datetime(2026, 6, 9, 22, 50, tzinfo=UTC)  # 07:50 in Tokyo on 06-10
    with _harness(store, tmp_path, start) as h:
        h.add_invoices(invoice("INV-T", date(2026, 6, 9), email=tokyo.email), customers=(tokyo,))
        h.tick_to(datetime(2026, 6, 9, 23, 0, tzinfo=UTC))  # 08:00 Tokyo: enqueued, no worker yet
        h.clock.set(datetime(2026, 6, 10, 16, 0, tzinfo=UTC))  # the worker comes back at 01:00 on 06-11 in Tokyo
        h.new_worker().drain()
        (row,) = h.reminders()
        assert (row["stage"], row["business_date"]) == (1, date(2026, 6, 10))


def test_send_zone_customer_needs_a_scan_every_quarter_hour() -> None:
    assert Policy(send_zone="customer").scan_schedule == "*/15 * * * *"  # the default cron follows
    customer = policy_from_dict({"reminders": {"send_zone": "customer"}})
    assert (customer.schedule, customer.scan_schedule) == ("0 8 * * *", "*/15 * * * *")  # as written, as it runs
    # derived, never stored: switching the send zone back (demo --send-zone schedule) gives the written cron again
    assert dataclasses.replace(customer, send_zone="schedule").scan_schedule == "0 8 * * *"
    assert dataclasses.replace(Policy(), send_zone="customer").scan_schedule == "*/15 * * * *"
    with pytest.raises(ConfigError, match=r'schedule = "0 \* \* \* \*" must fire at every quarter hour'):
        Policy(send_zone="customer", schedule="0 * * * *")
    with pytest.raises(ConfigError, match=r"send_at = \"8am\" is not a local time of day"):
        Policy(send_zone="customer", send_at="8am")
    with pytest.raises(ConfigError, match="send_zone = \"planet\" is not a send zone"):
        policy_from_dict({"reminders": {"send_zone": "planet"}})
