"""The clock at the edges real deployments hit (issue 9 items 3, 4, 13), on both backends.

- A schedule edit never serves the same business period twice.
- Wall-clock steps (back and forward) never lose or repeat an occurrence; ``time_source = database``.
- A late tick is one catch-up, whatever the schedule's period.

Each test drives :class:`ClockProcess` objects with a :class:`SimulatedClock` whose
:meth:`~SimulatedClock.step` may go backwards, as NTP or an operator steps a host clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import PERIOD_SERVED, ClockProcess, Fire
from oncebeat.dbtime import DatabaseClock, time_source_clock
from oncebeat.errors import ConfigError, TransientStoreError
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock


def at(hour: int, minute: int = 0, second: int = 0, *, day: int = 1, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


def app_with(key: str, expression: str, *, tz: str = "UTC", **options: Any) -> App:
    app = App()

    @app.task()
    def work(ctx: Any, **args: Any) -> None:
        pass

    app.schedule(key, expression, tz=tz, task="work", **options)
    return app


def ledger(store: Store, key: str | None = None) -> list[tuple[datetime, str]]:
    return [(r["fire_at"], r["outcome"]) for r in store.read("list_occurrences", schedule_key=key)]


def jobs(store: Store) -> list[dict[str, Any]]:
    return store.read("list_jobs", state=None, task=None, limit=100_000)


def events(store: Store, kind: str) -> list[dict[str, Any]]:
    return store.read("list_events", subject=None, kind=kind, since=datetime(2000, 1, 1, tzinfo=UTC))


def run_until(sim_clock: SimulatedClock, end: datetime, step: float, *clocks: ClockProcess) -> list[Fire]:
    fires: list[Fire] = []
    while sim_clock.now() < end:
        sim_clock.advance(step)
        for c in clocks:
            fires.extend(c.tick())
    return fires


def every(start: datetime, end: datetime, seconds: float) -> list[datetime]:
    """start, start + seconds, … up to and including end."""
    out, t = [], start
    while t <= end:
        out.append(t)
        t += timedelta(seconds=seconds)
    return out


# --- a schedule edit never serves the same period twice --------------------------------------------------------


def test_daily_schedule_moved_west_after_todays_run_does_not_run_again_for_the_same_business_date(
        store: Store, sim_clock: SimulatedClock) -> None:
    sim_clock.set(datetime(2026, 6, 1, 6, 0, tzinfo=UTC))
    london = ClockProcess(app_with("report", "0 8 * * *", tz="Europe/London"), store, clock=sim_clock)
    london.start()
    run_until(sim_clock, at(9, day=1, month=6), 300, london)  # 08:00 BST = 07:00Z fired
    lines: list[str] = []

    new_york = ClockProcess(app_with("report", "0 8 * * *", tz="America/New_York"), store, clock=sim_clock,
                            echo=lines.append)  # the redeploy at 09:00Z
    assert new_york.sync().changed == ["report"]
    run_until(sim_clock, at(13, day=2, month=6), 300, new_york)

    assert ledger(store) == [(at(7, day=1, month=6), "enqueued"),
                             (at(12, day=1, month=6), "coalesced"),  # 08:00 New York, same business date
                             (at(12, day=2, month=6), "enqueued")]
    rows = store.read("list_occurrences", schedule_key="report")
    assert [r["reason"] for r in rows] == [None, PERIOD_SERVED, None]
    assert [str(r["business_date"]) for r in rows] == ["2026-06-01", "2026-06-01", "2026-06-02"]
    assert len(jobs(store)) == 2
    [coalesced] = events(store, "occurrence.coalesced")
    assert coalesced["detail"]["reason"] == PERIOD_SERVED
    assert any("not fired: period already served" in line and "2026-06-01T08:00:00-04:00" in line
               for line in lines), lines


def test_daily_schedule_moved_east_runs_on_the_next_business_date_it_reaches(
        store: Store, sim_clock: SimulatedClock) -> None:
    sim_clock.set(datetime(2026, 6, 1, 11, 0, tzinfo=UTC))
    new_york = ClockProcess(app_with("report", "0 8 * * *", tz="America/New_York"), store, clock=sim_clock)
    new_york.start()
    run_until(sim_clock, at(13, day=1, month=6), 300, new_york)  # 08:00 EDT = 12:00Z, business date June 1

    tokyo = ClockProcess(app_with("report", "0 8 * * *", tz="Asia/Tokyo"), store, clock=sim_clock)
    tokyo.start()
    run_until(sim_clock, at(0, day=2, month=6), 300, tokyo)  # 08:00 JST June 2 = 23:00Z June 1

    rows = store.read("list_occurrences", schedule_key="report")
    assert [(r["fire_at"], r["outcome"], str(r["business_date"])) for r in rows] == [
        (at(12, day=1, month=6), "enqueued", "2026-06-01"),
        (at(23, day=1, month=6), "enqueued", "2026-06-02"),  # a new business date in the new zone
    ]


@pytest.mark.parametrize(("before", "after", "changed_at", "until", "expected"), [
    pytest.param("0 8 * * 1", "0 9 * * 3", at(12, day=2), at(12, day=12),  # Mon 2 March ran; Wed 4 same week
                 [(at(8, day=2), "enqueued"), (at(9, day=4), "coalesced"), (at(9, day=11), "enqueued")], id="week"),
    pytest.param("0 8 1 * *", "0 8 15 * *", at(12, day=2, month=4), at(12, day=16, month=5),
                 [(at(8, day=1, month=4), "enqueued"), (at(8, day=15, month=4), "coalesced"),
                  (at(8, day=15, month=5), "enqueued")], id="month"),
])
def test_weekly_and_monthly_schedules_serve_each_period_once_across_an_expression_change(
        store: Store, sim_clock: SimulatedClock, before: str, after: str, changed_at: datetime, until: datetime,
        expected: list[tuple[datetime, str]]) -> None:
    old = ClockProcess(app_with("digest", before), store, clock=sim_clock)
    old.start()
    run_until(sim_clock, changed_at, 3600, old)
    new = ClockProcess(app_with("digest", after), store, clock=sim_clock)
    new.start()
    run_until(sim_clock, until, 3600, new)
    assert ledger(store) == expected
    assert [r["reason"] for r in store.read("list_occurrences", schedule_key="digest")] == [
        PERIOD_SERVED if outcome == "coalesced" else None for _, outcome in expected]


def test_sub_daily_schedule_changed_never_fires_an_instant_at_or_before_its_last_fire(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = app_with("poll", "*/15 * * * *", catchup="none")
    ClockProcess(app, store, clock=sim_clock).start()
    fast = SimulatedClock(at(12, 30, 1))  # a host whose clock runs 30 minutes fast records 12:30 at 12:00
    ClockProcess(app, store, clock=fast).start()
    assert ledger(store) == [(at(12, 15), "missed"), (at(12, 30), "enqueued")]

    sim_clock.set(at(12, 6))  # the real time: the definition changes to every 10 minutes
    changed = ClockProcess(app_with("poll", "*/10 * * * *", catchup="all"), store, clock=sim_clock)
    assert changed.sync().changed == ["poll"]
    run_until(sim_clock, at(13, 1), 60, changed)
    assert ledger(store) == [(at(12, 15), "missed"), (at(12, 30), "enqueued"), (at(12, 40), "enqueued"),
                             (at(12, 50), "enqueued"), (at(13), "enqueued")], "12:10 … 12:30: not after the last fire"


def test_a_manual_run_does_not_use_up_the_business_period(store: Store, sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(app_with("report", "0 14 * * *"), store, clock=sim_clock)
    clock.start()
    sim_clock.set(at(12, 30))
    clock.trigger("report")
    run_until(sim_clock, at(14, 30), 300, clock)
    assert ledger(store) == [(at(12, 30), "manual"), (at(14), "enqueued")]


# --- wall-clock steps never lose or repeat an occurrence ------------------------------------------------------


def test_wall_clock_stepped_back_never_repeats_an_occurrence(store: Store, sim_clock: SimulatedClock) -> None:
    lines: list[str] = []
    clock = ClockProcess(app_with("poll", "*/5 * * * *"), store, clock=sim_clock, echo=lines.append)
    clock.start()
    run_until(sim_clock, at(12, 20), 60, clock)
    sim_clock.step(-600)  # NTP steps the host clock back ten minutes
    assert sim_clock.now() == at(12, 10)
    run_until(sim_clock, at(12, 40), 60, clock)

    assert ledger(store) == [(t, "enqueued") for t in every(at(12, 5), at(12, 40), 300)]
    assert len(jobs(store)) == 8
    [stepped] = events(store, "clock.time_stepped")
    assert stepped["detail"]["seconds"] == -540.0  # 12:20 to 12:11 (stepped at 12:20, next tick one minute on)
    assert any("wall clock stepped back" in line and "none repeats" in line for line in lines), lines


def test_clock_that_ran_fast_and_was_stepped_back_loses_and_repeats_nothing(
        store: Store, sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(app_with("poll", "*/5 * * * *", catchup="none"), store, clock=sim_clock)
    clock.start()
    run_until(sim_clock, at(12, 3), 60, clock)
    sim_clock.step(450)  # the host clock jumps seven and a half minutes fast: 12:10:30
    clock.tick()
    sim_clock.step(-450)  # … and NTP steps it back: 12:03 again
    run_until(sim_clock, at(12, 31), 60, clock)

    assert ledger(store) == [(at(12, 5), "missed"), (at(12, 10), "enqueued")] + [
        (t, "enqueued") for t in every(at(12, 15), at(12, 30), 300)], "12:10 fired early, never again"


def test_a_schedule_first_seen_while_the_host_clock_ran_fast_fires_its_instants_after_the_step_back(
        store: Store, sim_clock: SimulatedClock) -> None:
    """Issue 22 item 5: a */5 schedule registered at true 11:59 on a host 20 minutes fast, the clock stepped back
    at 12:02: 12:05, 12:10 and 12:15 were never fired and never recorded (the schedule's start boundary, 12:19,
    came from the fast clock)."""
    sim_clock.set(at(12, 19))  # true time 11:59, the host 20 minutes fast
    clock = ClockProcess(app_with("poll", "*/5 * * * *"), store, clock=sim_clock)
    clock.start()  # the schedule is first synced: active since 12:19 by the fast clock
    sim_clock.step(-17 * 60)  # NTP steps the host clock back to the true time: 12:02
    run_until(sim_clock, at(12, 31), 60, clock)
    assert ledger(store) == [(t, "enqueued") for t in every(at(12, 5), at(12, 30), 300)], "none skipped"
    restarted = ClockProcess(app_with("poll", "*/5 * * * *"), store, clock=sim_clock)
    assert [f for f in restarted.start() if f.inserted] == []  # and nothing twice


@pytest.mark.parametrize(("policy", "expected"), [
    ("none", ["missed"] * 5 + ["enqueued"]),
    ("latest", ["coalesced"] * 5 + ["enqueued"]),
    ("all", ["enqueued"] * 6),
])
def test_wall_clock_stepped_forward_follows_the_catch_up_policy(store: Store, sim_clock: SimulatedClock,
                                                                policy: str, expected: list[str]) -> None:
    clock = ClockProcess(app_with("poll", "*/5 * * * *", catchup=policy), store, clock=sim_clock)
    clock.start()
    sim_clock.step(1810)  # 12:00 → 12:30:10 in one step
    clock.tick()
    assert ledger(store) == list(zip(every(at(12, 5), at(12, 30), 300), expected, strict=True))
    [catchup] = events(store, "clock.catchup")
    assert catchup["detail"]["summary"].startswith(f"poll: 5 occurrence(s) missed since the last tick, policy {policy}")


def test_a_second_clock_whose_host_runs_fast_makes_the_right_clock_skip_nothing_and_repeat_nothing(
        store: Store, sim_clock: SimulatedClock) -> None:
    fast = SimulatedClock(sim_clock.now() + timedelta(seconds=420))  # seven minutes fast
    app = app_with("poll", "*/5 * * * *")
    right, ahead = ClockProcess(app, store, clock=sim_clock), ClockProcess(app, store, clock=fast)
    right.start()
    ahead.start()
    fires: list[Fire] = []
    for _ in range(60):
        sim_clock.advance(30)
        fast.advance(30)
        fires += ahead.tick() + right.tick()
    assert ledger(store) == [(t, "enqueued") for t in every(at(12, 5), at(12, 35), 300)]
    assert all(f.inserted for f in fires), "the right clock never even tried an instant already recorded"


def test_time_source_database_is_the_postgresql_clock_and_is_refused_on_sqlite(
        backend: str, store: Store) -> None:
    if backend == "sqlite":
        with pytest.raises(ConfigError, match="time_source = database needs PostgreSQL"):
            time_source_clock(store, "database")
        return
    clock = time_source_clock(store, "database")
    assert isinstance(clock, DatabaseClock)
    first = clock.now()
    assert abs((first - datetime.now(UTC)).total_seconds()) < 300, "the test database runs on this host"
    assert clock.now() >= first
    lines: list[str] = []
    process = ClockProcess(app_with("poll", "*/5 * * * *"), store, clock=clock, echo=lines.append)
    process.start()
    assert lines[0].startswith("time source: database clock (PostgreSQL clock_timestamp()"), lines
    [row] = [p for p in store.read("list_processes") if p["id"] == process.process_id]
    assert row["info"]["time_source"].startswith("database clock")


def test_time_source_must_be_host_or_database(store: Store) -> None:
    with pytest.raises(ConfigError, match="time_source must be one of host, database, not 'ntp'"):
        time_source_clock(store, "ntp")


def test_start_up_report_names_the_host_clock(store: Store) -> None:
    lines: list[str] = []
    process = ClockProcess(app_with("poll", "*/5 * * * *"), store, clock=time_source_clock(store, "host"),
                           echo=lines.append)
    process.start()
    assert lines[0] == "time source: host clock (this machine's wall clock)"


# --- a late tick is one catch-up, whatever the period ---------------------------------------------------------


@pytest.mark.parametrize("policy", ["none", "latest", "all"])
@pytest.mark.parametrize(("expression", "down", "period"), [
    pytest.param("every 1s", 120, 1, id="every-second"),
    pytest.param("* * * * *", 7200, 60, id="every-minute"),
])
def test_restart_after_downtime_is_at_most_one_catch_up_run_per_schedule(
        store: Store, sim_clock: SimulatedClock, policy: str, expression: str, down: int, period: int) -> None:
    app = app_with("beat", expression, catchup=policy)
    ClockProcess(app, store, clock=sim_clock).start()
    sim_clock.advance(down + 0.5)  # restarted half a second after an instant
    lines: list[str] = []

    ClockProcess(app, store, clock=sim_clock, echo=lines.append).start()
    instants = every(at(12) + timedelta(seconds=period), at(12) + timedelta(seconds=down), period)
    outcomes = [outcome for _, outcome in ledger(store)]
    late = len(instants) - 1
    assert [t for t, _ in ledger(store)] == instants
    if policy == "none":
        assert outcomes == ["missed"] * late + ["enqueued"]  # the newest is on time; nothing caught up
    elif policy == "latest":
        assert outcomes == ["coalesced"] * late + ["enqueued"]
    else:
        assert outcomes == ["enqueued"] * len(instants)
    assert len(jobs(store)) == outcomes.count("enqueued")
    summary = f"beat: {late} occurrence(s) missed during downtime, policy {policy}: "
    assert any(line.startswith(summary) for line in lines), lines


@pytest.mark.parametrize(("policy", "runs"), [("none", 1), ("latest", 1), ("all", 30)])
def test_misfire_grace_longer_than_the_period_does_not_enqueue_every_recent_instant(
        store: Store, sim_clock: SimulatedClock, policy: str, runs: int) -> None:
    app = app_with("beat", "every 1s", catchup=policy)
    clock = ClockProcess(app, store, clock=sim_clock, misfire_grace=60)
    clock.start()
    sim_clock.advance(30.2)  # frozen for 30 s, well inside the 60 s grace
    clock.tick()
    assert len(ledger(store)) == 30
    assert len(jobs(store)) == runs


@pytest.mark.parametrize("policy", ["none", "latest", "all"])
def test_database_blip_on_a_minute_schedule_is_at_most_one_catch_up_run(
        store: Store, sim_clock: SimulatedClock, policy: str) -> None:
    clock = ClockProcess(app_with("beat", "* * * * *", catchup=policy), store, clock=sim_clock)
    clock.start()
    down = {"until": at(12, 5, 10)}

    def unreachable(query: str) -> None:
        if sim_clock.now() < down["until"] and query == "get_schedule":
            raise TransientStoreError("connection refused (injected)")

    store.before_statement = unreachable
    try:
        for _ in range(31):  # ticks every 10 s from 12:00:10; those before 12:05:10 fail
            sim_clock.advance(10)
            try:
                clock.tick()
            except TransientStoreError:
                pass
    finally:
        store.before_statement = None
    outcomes = [o for _, o in ledger(store)]
    assert [t for t, _ in ledger(store)] == every(at(12, 1), at(12, 5), 60)
    expected = {"none": ["missed"] * 4 + ["enqueued"], "latest": ["coalesced"] * 4 + ["enqueued"],
                "all": ["enqueued"] * 5}[policy]
    assert outcomes == expected


def test_days_a_catch_up_passes_over_leave_a_missed_row_each_with_the_policy_that_decided(
        store: Store, sim_clock: SimulatedClock) -> None:
    """Issue 22 item 10: ten days down under catchup = latest ran one catch-up run (right), but the days
    before the catch-up window left no row in the occurrence ledger."""
    from oncebeat.clock import PASSED_OVER_ROWS

    app = App()
    app.task(name="report")(lambda ctx: None)
    app.schedule("daily", "0 8 * * *", tz="America/Chicago", task="report", catchup="latest")
    app.schedule("minutely", "every 1m", tz="UTC", task="report", catchup="latest", catchup_window=3600)
    sim_clock.set(datetime(2026, 3, 2, 12, 0, tzinfo=UTC))
    ClockProcess(app, store, clock=sim_clock).start()
    sim_clock.set(datetime(2026, 3, 12, 15, 0, tzinfo=UTC))  # ten days later (08:00 Chicago is 13:00/14:00 UTC)
    fires = ClockProcess(app, store, clock=sim_clock).start()
    assert [f.outcome for f in fires if f.schedule_key == "daily" and f.inserted] == ["enqueued"]
    daily = store.read("list_occurrences", schedule_key="daily")
    missed = sorted(r["fire_at"] for r in daily if r["outcome"] == "missed")
    assert len(missed) == 10 and {r["outcome"] for r in daily} == {"enqueued", "missed"}  # Mar 2 to Mar 11
    assert all("outside the catch-up window (policy latest, window 24 h)" in (r["reason"] or "")
               for r in daily if r["outcome"] == "missed")
    # ten days of a minutely schedule: 60 in the window (one runs), then PASSED_OVER_ROWS rows and one summary row
    minutely = store.read("list_occurrences", schedule_key="minutely")
    outside = [r for r in minutely if r["outcome"] == "missed" and "outside the catch-up window" in (r["reason"] or "")]
    assert len(outside) == PASSED_OVER_ROWS + 1
    [summary] = [r for r in outside if "instants from" in r["reason"]]
    total = 10 * 24 * 60 + 3 * 60 - 60  # every minute from the first start to an hour before the restart
    assert summary["reason"].startswith(f"{total - PASSED_OVER_ROWS} instants from 2026-03-02T12:01:00+00:00 to ")
    assert len(minutely) == len(outside) + 60
    # a restart finds them recorded: nothing fires, nothing is recorded twice
    again = ClockProcess(app, store, clock=sim_clock).start()
    assert not [f for f in again if f.inserted]
    assert len(store.read("list_occurrences", schedule_key="minutely")) == len(minutely)
