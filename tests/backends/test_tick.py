"""``oncebeat tick`` as a library call (:meth:`ClockProcess.tick_once`), on both backends.

A deployment without an always-on clock runs ``oncebeat tick`` from cron, a PaaS
scheduler, a systemd timer or a Kubernetes CronJob: every pass fires what the
ledger says is due and exits, and however late, often or concurrently it runs,
each occurrence runs once. ``--at`` maps an external scheduler's named instant
to the schedule's occurrence.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import ClockProcess, Fire
from oncebeat.errors import OncebeatError
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock


def at(hour: int, minute: int = 0, second: int = 0, *, day: int = 1) -> datetime:
    return datetime(2026, 3, day, hour, minute, second, tzinfo=UTC)


def daily_app(catchup: str = "latest", catchup_window: float = 86400) -> App:
    app = App()

    @app.task()
    def report(ctx: Any) -> None:
        pass

    app.schedule("report", "0 8 * * *", tz="America/Chicago", task="report", catchup=catchup,  # 14:00Z in March
                 catchup_window=catchup_window)
    app.schedule("poll", "*/15 * * * *", tz="UTC", task="report", catchup=catchup, catchup_window=catchup_window)
    return app


def ledger(store: Store, key: str) -> list[tuple[datetime, str]]:
    return [(r["fire_at"], r["outcome"]) for r in store.read("list_occurrences", schedule_key=key)]


def jobs(store: Store) -> list[dict[str, Any]]:
    return store.read("list_jobs", state=None, task=None, limit=100_000)


def tick(app: App, store: Store, clock: SimulatedClock, **options: Any) -> list[Fire]:
    at_instant = options.pop("at", None)
    return ClockProcess(app, store, clock=clock, misfire_grace=3600, **options).tick_once(at=at_instant)


def test_first_tick_syncs_and_fires_nothing_then_each_pass_fires_what_is_due(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    lines: list[str] = []
    assert tick(app, store, sim_clock, echo=lines.append) == [], "no run on boot"
    assert lines[0] == "time source: simulated clock"
    for _ in range(2 * 24 * 12):  # cron every 5 minutes for two days
        sim_clock.advance(300)
        tick(app, store, sim_clock)
    assert ledger(store, "report") == [(at(14, day=1), "enqueued"), (at(14, day=2), "enqueued")]
    assert len(ledger(store, "poll")) == 2 * 24 * 4
    assert {o for _, o in ledger(store, "poll")} == {"enqueued"}
    assert len(jobs(store)) == 2 + 2 * 24 * 4
    roles = {p["role"] for p in store.read("list_processes")}
    assert roles == {"tick"}
    assert all(p["stopped_at"] is not None for p in store.read("list_processes"))


def test_a_tick_run_twice_at_the_same_moment_fires_nothing_the_second_time(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    sim_clock.set(at(13, 50))
    tick(app, store, sim_clock)  # the first pass syncs the definitions
    sim_clock.set(at(14, 3))
    first, second = tick(app, store, sim_clock), tick(app, store, sim_clock)
    assert [(f.schedule_key, f.fire_at, f.outcome) for f in first] == [
        ("poll", at(14), "enqueued"), ("report", at(14), "enqueued")]
    assert second == []
    assert len(jobs(store)) == 2


@pytest.mark.parametrize(("policy", "expected"), [
    ("none", ["missed"] * 3 + ["enqueued"]),
    ("latest", ["coalesced"] * 3 + ["enqueued"]),
    ("all", ["enqueued"] * 4),
])
def test_a_tick_days_late_is_one_catch_up_under_the_schedules_policy(store: Store, sim_clock: SimulatedClock,
                                                                    policy: str, expected: list[str]) -> None:
    app = daily_app(catchup=policy, catchup_window=5 * 86400)
    tick(app, store, sim_clock)
    sim_clock.set(at(14, 20, day=4))  # the scheduler stopped for three days
    tick(app, store, sim_clock)
    assert ledger(store, "report") == list(zip([at(14, day=d) for d in (1, 2, 3, 4)], expected, strict=True))
    assert [o for _, o in ledger(store, "poll")].count("enqueued") == (1 if policy != "all" else 3 * 24 * 4 + 9)


def test_ticks_running_concurrently_enqueue_each_occurrence_once(db_url: str, store: Store,
                                                                 sim_clock: SimulatedClock) -> None:
    app = daily_app()
    sim_clock.set(at(13, 50))
    tick(app, store, sim_clock)  # the first pass syncs the definitions
    sim_clock.set(at(14, 0, 5))
    stores = [open_store(db_url) for _ in range(3)]  # three CronJob pods started together
    fires: list[Fire] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def pod(s: Store) -> None:
        try:
            barrier.wait(timeout=10)
            fires.extend(tick(app, s, sim_clock))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=pod, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        for s in stores:
            s.close()
    assert errors == []
    assert ledger(store, "report") == [(at(14), "enqueued")]
    assert ledger(store, "poll") == [(at(14), "enqueued")]
    assert len(jobs(store)) == 2
    assert sum(1 for f in fires if f.inserted) == 2


def test_at_maps_the_named_instant_to_the_schedules_occurrence_and_a_duplicate_delivery_adds_nothing(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    sim_clock.set(at(13, 50))
    tick(app, store, sim_clock)  # the first pass syncs the definitions
    sim_clock.set(at(14, 0, 2))
    first = tick(app, store, sim_clock, at=at(14, 0, 0))  # the event named 08:00 CST = 14:00Z
    assert {(f.schedule_key, f.fire_at, f.outcome) for f in first} == {
        ("report", at(14), "enqueued"), ("poll", at(14), "enqueued")}
    sim_clock.advance(40)
    assert tick(app, store, sim_clock, at=at(14, 0, 0)) == [], "the same event delivered again"
    assert tick(app, store, sim_clock, at=at(14, 0, 30)) == [], "an instant named a little after maps to 14:00"
    assert len(jobs(store)) == 2


def test_early_delivery_fires_the_named_occurrence_once_and_the_next_tick_does_not_repeat_it(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    sim_clock.set(at(13, 50))
    tick(app, store, sim_clock)  # the first pass syncs the definitions
    sim_clock.set(at(13, 59, 50))  # delivered ten seconds before the instant it names
    early = tick(app, store, sim_clock, at=at(14))
    assert {(f.schedule_key, f.fire_at) for f in early} == {("report", at(14)), ("poll", at(14))}
    [occurrence] = store.read("list_occurrences", schedule_key="report")
    assert occurrence["created_at"] == at(13, 59, 50), "recorded at the wall time it happened"
    sim_clock.set(at(14, 5))
    assert tick(app, store, sim_clock) == []
    assert ledger(store, "report") == [(at(14), "enqueued")]


def test_late_delivery_of_a_named_instant_fires_that_occurrence_on_time_and_nothing_after_it(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app(catchup="none")
    sim_clock.set(at(13, 50))
    tick(app, store, sim_clock)
    sim_clock.set(at(14, 40))  # the event for 14:00 arrives 40 minutes late
    fires = tick(app, store, sim_clock, at=at(14))
    assert {(f.schedule_key, f.fire_at, f.outcome) for f in fires if f.schedule_key == "report"} == {
        ("report", at(14), "enqueued")}
    assert ledger(store, "poll")[-1] == (at(14), "enqueued"), "14:15 and 14:30 are left to the next tick"


def test_at_far_in_the_future_is_refused_and_records_nothing(store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    tick(app, store, sim_clock)
    with pytest.raises(OncebeatError, match="is 86400 s after this clock's time"):
        tick(app, store, sim_clock, at=sim_clock.now() + timedelta(days=1))
    assert jobs(store) == []
