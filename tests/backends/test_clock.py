"""The clock (G1, G2, G7): one job per occurrence, whatever the number of clocks, restarts and catch-ups.

Each test drives :class:`ClockProcess` objects with a :class:`SimulatedClock`;
several ``ClockProcess`` objects on one store stand for several clock
processes (their only shared state is the database, as in production).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import ClockProcess, Fire, fire_occurrence
from oncebeat.errors import OncebeatError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

NOON = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # where sim_clock starts


def at(hour: int, minute: int = 0, second: int = 0, *, day: int = 1, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


def hourly_app(*keys: str, expression: str = "0 * * * *", tz: str = "UTC", **options: Any) -> App:
    app = App()

    @app.task()
    def tick_task(ctx: Any, **args: Any) -> None:
        pass

    for key in keys or ("hourly",):
        app.schedule(key, expression, tz=tz, task="tick_task", **options)
    return app


def clock_for(app: App, store: Store, sim_clock: SimulatedClock, **options: Any) -> ClockProcess:
    return ClockProcess(app, store, clock=sim_clock, **options)


def occurrences(store: Store, key: str | None = None) -> list[dict[str, Any]]:
    return store.read("list_occurrences", schedule_key=key)


def ledger(store: Store, key: str | None = None) -> list[tuple[datetime, str]]:
    """(fire_at, outcome) of every occurrence, oldest first."""
    return [(r["fire_at"], r["outcome"]) for r in occurrences(store, key)]


def all_jobs(store: Store) -> list[dict[str, Any]]:
    return sorted(store.read("list_jobs", state=None, task=None, limit=100_000), key=lambda j: j["id"])


def events(store: Store, kind: str) -> list[dict[str, Any]]:
    return store.read("list_events", subject=None, kind=kind, since=datetime(2000, 1, 1, tzinfo=UTC))


def run_until(sim_clock: SimulatedClock, end: datetime, step: float, *clocks: ClockProcess) -> list[Fire]:
    fires: list[Fire] = []
    while sim_clock.now() < end:
        sim_clock.advance(step)
        for c in clocks:
            fires.extend(c.tick())
    return fires


def assert_one_job_per_enqueued_occurrence(store: Store) -> None:
    occ = occurrences(store)
    jobs = all_jobs(store)
    with_job = [o for o in occ if o["outcome"] in ("enqueued", "manual", "backfilled")]
    assert sorted(o["job_id"] for o in with_job) == [j["id"] for j in jobs]
    assert sorted(j["occurrence_id"] for j in jobs) == sorted(o["id"] for o in with_job)
    assert all(o["job_id"] is None for o in occ if o not in with_job)


# --- one job per occurrence ----------------------------------------------------------------------------


def test_one_clock_enqueues_one_job_per_occurrence_over_many_ticks(store: Store, sim_clock: SimulatedClock) -> None:
    app = hourly_app("quarterly", expression="*/15 * * * *")
    clock = clock_for(app, store, sim_clock)
    clock.start()
    run_until(sim_clock, NOON + timedelta(days=1), 300, clock)

    expected = list(app.schedules["quarterly"].schedule().between(NOON, NOON + timedelta(days=1)))
    assert len(expected) == 96
    assert ledger(store) == [(t, "enqueued") for t in expected]
    assert_one_job_per_enqueued_occurrence(store)
    assert clock.fires == 96


def test_clocks_ticking_in_turns_enqueue_exactly_one_job_per_occurrence(store: Store,
                                                                        sim_clock: SimulatedClock) -> None:
    app = hourly_app("quarterly", expression="*/15 * * * *")
    clocks = [clock_for(app, store, sim_clock) for _ in range(3)]
    for c in clocks:
        c.start()
    fires: list[Fire] = []
    for step in range(6 * 12):
        sim_clock.advance(300)
        turn = clocks[step % 3:] + clocks[:step % 3]
        for c in turn:
            fires.extend(c.tick())

    expected = list(app.schedules["quarterly"].schedule().between(NOON, NOON + timedelta(hours=6)))
    assert ledger(store) == [(t, "enqueued") for t in expected]
    assert_one_job_per_enqueued_occurrence(store)
    assert sum(1 for f in fires if f.inserted) == len(expected)
    assert len(events(store, "occurrence.duplicate_rejected")) == sum(1 for f in fires if not f.inserted)


def test_clocks_ticking_at_the_same_moment_enqueue_exactly_one_job_per_occurrence(
        db_url: str, store: Store, sim_clock: SimulatedClock) -> None:
    app = hourly_app("quarterly", expression="*/15 * * * *")
    stores = [open_store(db_url) for _ in range(3)]  # separate connections, as separate processes have
    clocks = [clock_for(app, s, sim_clock) for s in stores]
    fires: list[Fire] = []
    errors: list[BaseException] = []
    try:
        for c in clocks:
            c.start()
        for _ in range(4 * 4):
            sim_clock.advance(900)
            barrier = threading.Barrier(len(clocks))

            def tick(c: ClockProcess, barrier: threading.Barrier = barrier) -> None:
                try:
                    barrier.wait(timeout=10)
                    fires.extend(c.tick())
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=tick, args=(c,)) for c in clocks]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
    finally:
        for s in stores:
            s.close()
    assert errors == []
    expected = list(app.schedules["quarterly"].schedule().between(NOON, NOON + timedelta(hours=4)))
    assert ledger(store) == [(t, "enqueued") for t in expected]
    assert_one_job_per_enqueued_occurrence(store)
    assert len(events(store, "occurrence.duplicate_rejected")) == sum(1 for f in fires if not f.inserted)


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_clock_that_loses_the_race_enqueues_nothing_and_audits_the_rejected_duplicate(
        db_url: str, store: Store, sim_clock: SimulatedClock) -> None:
    # PostgreSQL only: SQLite serialises writers (BEGIN IMMEDIATE), so there a second clock
    # reads the ledger only after the first committed and never even tries.
    app = hourly_app()
    winner_store, loser_store = open_store(db_url), open_store(db_url)
    try:
        winner, loser = clock_for(app, winner_store, sim_clock), clock_for(app, loser_store, sim_clock)
        winner.start()
        loser.start()
        sim_clock.set(at(13))
        winner_fires: list[Fire] = []

        def winner_commits_first(query: str) -> None:
            # The loser has read the ledger (nothing at 13:00 yet) and is about to insert.
            if query == "insert_occurrence" and not winner_fires:
                t = threading.Thread(target=lambda: winner_fires.extend(winner.tick()))
                t.start()
                t.join(timeout=30)

        loser_store.before_statement = winner_commits_first
        loser_fires = loser.tick()
    finally:
        winner_store.close()
        loser_store.close()

    assert [(f.fire_at, f.inserted, f.job_id is not None) for f in winner_fires] == [(at(13), True, True)]
    assert [(f.fire_at, f.inserted, f.job_id) for f in loser_fires] == [(at(13), False, None)]
    assert ledger(store) == [(at(13), "enqueued")]
    assert len(all_jobs(store)) == 1
    [rejected] = events(store, "occurrence.duplicate_rejected")
    assert rejected["process_id"] == loser.process_id
    assert rejected["detail"]["fire_at"] == at(13).isoformat()


def test_recording_an_occurrence_twice_enqueues_nothing_and_audits_the_duplicate(
        store: Store, sim_clock: SimulatedClock) -> None:
    definition = hourly_app().schedules["hourly"]
    schedule = definition.schedule()
    queue = Queue(store, clock=sim_clock, source=current_source("clock"))
    outcomes = []
    for _ in range(2):
        with store.transaction() as tx:
            outcomes.append(fire_occurrence(tx, queue=queue, definition=definition, schedule=schedule,
                                            instant=at(13), outcome="enqueued", source=current_source("clock"),
                                            now=sim_clock.now()))
    assert [(f.inserted, f.job_id is not None) for f in outcomes] == [(True, True), (False, False)]
    assert len(all_jobs(store)) == 1
    assert len(events(store, "occurrence.duplicate_rejected")) == 1


# --- restarts and downtime ---------------------------------------------------------------------------


def test_clock_restarted_exactly_at_a_fire_instant_it_already_fired_does_not_fire_again(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = hourly_app()
    first = clock_for(app, store, sim_clock)
    first.start()
    sim_clock.set(at(13))
    assert [f.fire_at for f in first.tick()] == [at(13)]

    restarted = clock_for(app, store, sim_clock)
    assert restarted.start() == []
    assert restarted.tick() == []
    run_until(sim_clock, at(14), 60, restarted)
    assert ledger(store) == [(at(13), "enqueued"), (at(14), "enqueued")]
    assert len(all_jobs(store)) == 2


def test_clock_restarted_exactly_at_a_fire_instant_fires_it_once(store: Store, sim_clock: SimulatedClock) -> None:
    app = hourly_app()
    clock_for(app, store, sim_clock).start()  # then dies before 13:00
    sim_clock.set(at(13))

    restarted = clock_for(app, store, sim_clock)
    assert [(f.fire_at, f.outcome, f.inserted) for f in restarted.start()] == [(at(13), "enqueued", True)]
    assert restarted.tick() == []
    assert clock_for(app, store, sim_clock).start() == [], "a second restart at the same instant"
    assert ledger(store) == [(at(13), "enqueued")]
    assert len(all_jobs(store)) == 1


@pytest.mark.parametrize(("policy", "expected"), [
    ("none", ["missed"] * 5),
    ("latest", ["coalesced"] * 4 + ["enqueued"]),
    ("all", ["enqueued"] * 5),
])
def test_downtime_applies_the_catch_up_policy_from_the_ledger(store: Store, sim_clock: SimulatedClock,
                                                              policy: str, expected: list[str]) -> None:
    app = hourly_app(catchup=policy)
    clock_for(app, store, sim_clock).start()
    sim_clock.set(at(17, 30))  # down from 12:00 to 17:30: 13:00 … 17:00 missed
    lines: list[str] = []

    fires = clock_for(app, store, sim_clock, echo=lines.append).start()
    assert ledger(store) == list(zip([at(h) for h in range(13, 18)], expected, strict=True))
    assert [f.outcome for f in fires] == expected
    assert_one_job_per_enqueued_occurrence(store)
    jobs = all_jobs(store)
    assert [j["occurrence_id"] for j in jobs] == [o["id"] for o in occurrences(store) if o["outcome"] == "enqueued"]
    assert any(f"5 occurrence(s) missed during downtime, policy {policy}" in line for line in lines), lines
    [catchup] = events(store, "clock.catchup")
    assert catchup["detail"]["at_startup"] is True


@pytest.mark.parametrize(("policy", "expected"), [
    ("none", ["missed", "missed"]),
    ("latest", ["coalesced", "enqueued"]),
    ("all", ["enqueued", "enqueued"]),
])
def test_downtime_beyond_the_catch_up_window_enqueues_nothing_from_outside_it(
        store: Store, sim_clock: SimulatedClock, policy: str, expected: list[str]) -> None:
    app = hourly_app(catchup=policy, catchup_window=2 * 3600)
    clock_for(app, store, sim_clock).start()
    sim_clock.set(at(17, 30))  # window: 15:30 … 17:30

    clock_for(app, store, sim_clock).start()
    # 13:00-15:00 lie outside the window: recorded missed with the policy that decided (issue 22 item 10), no job
    assert ledger(store) == [(at(13), "missed"), (at(14), "missed"), (at(15), "missed"),
                             (at(16), expected[0]), (at(17), expected[1])]
    assert {o["reason"] for o in occurrences(store)[:3]} == {
        f"outside the catch-up window (policy {policy}, window 2 h)"}
    assert_one_job_per_enqueued_occurrence(store)
    [catchup] = events(store, "clock.catchup")
    assert catchup["detail"]["missed_outside_window"] == 3


def test_new_schedule_never_fires_for_instants_before_it_was_synced(store: Store, sim_clock: SimulatedClock) -> None:
    assert clock_for(hourly_app("old"), store, sim_clock).start() == [], "no fire on boot at 12:00 sharp"
    sim_clock.set(at(15, 30))

    clock = clock_for(hourly_app("old", "new", catchup="all"), store, sim_clock)
    clock.start()
    assert ledger(store, "new") == []
    run_until(sim_clock, at(16, 30), 60, clock)
    assert ledger(store, "new") == [(at(16), "enqueued")]


def test_clock_started_on_a_fresh_database_does_not_fire_on_boot(store: Store, sim_clock: SimulatedClock) -> None:
    clock = clock_for(hourly_app(), store, sim_clock)
    assert clock.start() == []  # 12:00 sharp is an instant of the schedule
    assert clock.tick() == []
    assert all_jobs(store) == []


# --- pause, retire, change -----------------------------------------------------------------------------------


def test_paused_schedule_records_paused_occurrences_and_resumes_without_a_burst(
        store: Store, sim_clock: SimulatedClock) -> None:
    clock = clock_for(hourly_app(), store, sim_clock)
    clock.start()
    sim_clock.set(at(12, 30))
    assert clock.set_state("hourly", "paused") is True
    assert clock.set_state("hourly", "paused") is False, "already paused"
    run_until(sim_clock, at(15, 30), 300, clock)
    assert ledger(store) == [(at(13), "paused"), (at(14), "paused"), (at(15), "paused")]

    assert clock.set_state("hourly", "active") is True
    assert clock.tick() == [], "resuming does not burst"
    run_until(sim_clock, at(16, 30), 300, clock)
    assert ledger(store)[-1] == (at(16), "enqueued")
    assert len(all_jobs(store)) == 1
    assert [e["kind"] for e in events(store, "schedule.paused") + events(store, "schedule.resumed")] == [
        "schedule.paused", "schedule.resumed"]


def test_pause_by_another_process_is_honoured_at_the_very_next_fire(store: Store, sim_clock: SimulatedClock) -> None:
    app = hourly_app()
    running = clock_for(app, store, sim_clock)
    running.start()
    sim_clock.set(at(12, 59, 50))
    running.tick()  # the running clock has just re-read its schedules
    sim_clock.advance(5)
    operator = clock_for(app, store, sim_clock)  # e.g. `oncebeat schedules pause` in another process
    operator.set_state("hourly", "paused")
    sim_clock.set(at(13))
    running.tick()
    assert ledger(store) == [(at(13), "paused")]
    assert all_jobs(store) == []


def test_retired_schedule_never_fires_even_from_an_old_clock_that_still_defines_it(
        store: Store, sim_clock: SimulatedClock) -> None:
    old_app, new_app = hourly_app("kept", "dropped"), hourly_app("kept")
    old_clock = clock_for(old_app, store, sim_clock)
    old_clock.start()
    sim_clock.set(at(12, 59, 50))
    old_clock.tick()
    sim_clock.advance(5)

    new_clock = clock_for(new_app, store, sim_clock)  # the new release, without "dropped"
    assert new_clock.sync().retired == ["dropped"]
    run_until(sim_clock, at(13, 1), 5, old_clock, new_clock)  # the old clock's copy still says active at 13:00
    run_until(sim_clock, at(15, 30), 600, old_clock, new_clock)
    restarted_old = clock_for(old_app, store, sim_clock)  # the old release restarted by its supervisor
    assert restarted_old.sync().stale is True
    run_until(sim_clock, at(17, 30), 600, old_clock, new_clock, restarted_old)

    assert ledger(store, "dropped") == []
    assert ledger(store, "kept") == [(at(h), "enqueued") for h in range(13, 18)]
    [row] = store.read("get_schedule", key="dropped")
    assert row["state"] == "retired"
    assert_one_job_per_enqueued_occurrence(store)


def test_changed_expression_takes_effect_from_the_change(store: Store, sim_clock: SimulatedClock) -> None:
    old_clock = clock_for(hourly_app("report"), store, sim_clock, resync_interval=420)
    old_clock.start()  # re-reads the schedules table at least 7 minutes apart
    run_until(sim_clock, at(14, 55), 300, old_clock)  # … last re-read at 14:57, next at 15:04
    run_until(sim_clock, at(14, 59, 50), 10, old_clock)

    new_clock = clock_for(hourly_app("report", expression="15,45 * * * *"), store, sim_clock)
    assert new_clock.sync().changed == ["report"]
    run_until(sim_clock, at(15, 5), 10, old_clock, new_clock)
    run_until(sim_clock, at(16, 30), 60, old_clock, new_clock)

    assert ledger(store) == [(at(13), "enqueued"), (at(14), "enqueued"), (at(15, 15), "enqueued"),
                             (at(15, 45), "enqueued"), (at(16, 15), "enqueued")]
    [row] = store.read("get_schedule", key="report")
    assert (row["expression"], row["version"]) == ("15,45 * * * *", 2)


def test_change_never_fires_an_instant_at_or_before_the_last_recorded_one(store: Store,
                                                                          sim_clock: SimulatedClock) -> None:
    clock_for(hourly_app("report"), store, sim_clock).start()
    sim_clock.set(at(13, 20))
    clock = clock_for(hourly_app("report"), store, sim_clock)
    clock.start()
    assert ledger(store) == [(at(13), "enqueued")]

    changed = clock_for(hourly_app("report", expression="10 * * * *", catchup="all"), store, sim_clock)
    changed.start()  # 13:10 under the new expression is before the change: never fired
    run_until(sim_clock, at(14, 30), 60, changed)
    assert ledger(store) == [(at(13), "enqueued"), (at(14, 10), "enqueued")]


# --- operator actions ----------------------------------------------------------------------------------------


def test_backfill_records_backfilled_occurrences_and_skips_existing_instants(store: Store,
                                                                             sim_clock: SimulatedClock) -> None:
    clock = clock_for(hourly_app(), store, sim_clock)
    clock.start()
    run_until(sim_clock, at(15, 30), 600, clock)

    fires = clock.backfill("hourly", at(10), at(15))
    assert [(f.fire_at, f.inserted) for f in fires] == [
        (at(10), True), (at(11), True), (at(12), True), (at(13), False), (at(14), False), (at(15), False)]
    assert ledger(store) == [(at(10), "backfilled"), (at(11), "backfilled"), (at(12), "backfilled"),
                             (at(13), "enqueued"), (at(14), "enqueued"), (at(15), "enqueued")]
    assert_one_job_per_enqueued_occurrence(store)
    assert {o["source_kind"] for o in occurrences(store) if o["outcome"] == "backfilled"} == {"cli"}

    again = clock.backfill("hourly", at(10), at(15))
    assert [f.inserted for f in again] == [False] * 6, "a second backfill adds nothing"
    assert len(all_jobs(store)) == 6
    run_until(sim_clock, at(16, 30), 600, clock)
    assert ledger(store)[-1] == (at(16), "enqueued")
    assert len(all_jobs(store)) == 7


def test_backfill_refuses_the_future_and_unknown_schedules(store: Store, sim_clock: SimulatedClock) -> None:
    clock = clock_for(hourly_app(), store, sim_clock)
    clock.start()
    with pytest.raises(OncebeatError, match="future"):
        clock.backfill("hourly", at(10), at(18))
    with pytest.raises(OncebeatError, match="no schedule 'nightly'"):
        clock.backfill("nightly", at(10), at(11))
    assert all_jobs(store) == []


def test_manual_trigger_records_manual_and_does_not_suppress_the_next_scheduled_fire(
        store: Store, sim_clock: SimulatedClock) -> None:
    clock = clock_for(hourly_app(), store, sim_clock)
    clock.start()
    sim_clock.set(at(12, 20))

    manual = clock.trigger("hourly")
    assert (manual.outcome, manual.inserted, manual.fire_at) == ("manual", True, at(12, 20))
    [occurrence] = occurrences(store)
    assert (occurrence["outcome"], occurrence["source_kind"]) == ("manual", "manual")
    [job] = all_jobs(store)
    assert (job["source_kind"], job["occurrence_id"]) == ("manual", occurrence["id"])

    run_until(sim_clock, at(13, 30), 60, clock)
    assert ledger(store) == [(at(12, 20), "manual"), (at(13), "enqueued")]
    assert_one_job_per_enqueued_occurrence(store)
    assert len(events(store, "occurrence.manual")) == 1


# --- zones -------------------------------------------------------------------------------------------------------


@pytest.fixture
def host_in_tokyo() -> Iterator[None]:
    """The host's own zone differs from the schedule's (UTC+9 while Chicago is UTC-6/-5)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_business_date_is_the_local_date_in_the_schedule_zone_across_dst(
        host_in_tokyo: None, store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    seen: list[tuple[str, date | None]] = []

    @app.task()
    def close_books(ctx: Any, label: str) -> None:
        seen.append((label, ctx.business_date()))

    app.schedule("late", "30 23 * * *", tz="America/Chicago", task="close_books", args={"label": "late"})
    app.schedule("early", "30 2 * * *", tz="America/Chicago", task="close_books", args={"label": "early"})
    sim_clock.set(datetime(2026, 3, 6, 12, 0, tzinfo=UTC))
    clock = clock_for(app, store, sim_clock)
    worker = Worker(app, store, clock=sim_clock)
    clock.start()
    while sim_clock.now() < datetime(2026, 3, 10, 12, 0, tzinfo=UTC):
        sim_clock.advance(1800)
        clock.tick()
        worker.drain()

    late = [(o["fire_at"], o["local_fire_at"], o["business_date"]) for o in occurrences(store, "late")]
    assert late == [
        (at(5, 30, day=7), "2026-03-06T23:30:00-06:00", date(2026, 3, 6)),
        (at(5, 30, day=8), "2026-03-07T23:30:00-06:00", date(2026, 3, 7)),
        (at(4, 30, day=9), "2026-03-08T23:30:00-05:00", date(2026, 3, 8)),
        (at(4, 30, day=10), "2026-03-09T23:30:00-05:00", date(2026, 3, 9)),
    ]
    early = [(o["fire_at"], o["local_fire_at"], o["business_date"]) for o in occurrences(store, "early")]
    assert early == [
        (at(8, 30, day=7), "2026-03-07T02:30:00-06:00", date(2026, 3, 7)),
        (at(8, 0, day=8), "2026-03-08T03:00:00-05:00", date(2026, 3, 8)),  # 02:30 is in the gap: 03:00 CDT
        (at(7, 30, day=9), "2026-03-09T02:30:00-05:00", date(2026, 3, 9)),
        (at(7, 30, day=10), "2026-03-10T02:30:00-05:00", date(2026, 3, 10)),
    ]
    assert {o["tz"] for o in occurrences(store)} == {"America/Chicago"}
    assert sorted(seen) == sorted([("late", d) for _, _, d in late] + [("early", d) for _, _, d in early])
    host_dates = [datetime.fromtimestamp(fire_at.timestamp()).date() for fire_at, _, _ in late]
    assert host_dates == [date(2026, 3, d) for d in (7, 8, 9, 10)], "the host (Tokyo) is already a day ahead"


def test_a_re_read_fetches_only_changed_rows_and_sees_a_run_time_edit(store: Store, sim_clock: SimulatedClock,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from oncebeat import ledger as ledger_mod
    from oncebeat.schedule_admin import pause_schedule, set_schedule

    keys = [f"report-{i:02d}" for i in range(20)]
    app = hourly_app(*keys)
    clock = clock_for(app, store, sim_clock, resync_interval=60)
    clock.start()
    fetched: list[list[str] | None] = []
    real = ledger_mod.list_schedules

    def spy(db: Any, *, keys: list[str] | None = None) -> list[dict[str, Any]]:
        fetched.append(keys)
        return real(db, keys=keys)

    monkeypatch.setattr(ledger_mod, "list_schedules", spy)
    run_until(sim_clock, at(12, 10), 60, clock)  # re-reads with nothing changed: no whole rows fetched
    assert fetched and all(k == [] for k in fetched), fetched

    sim_clock.set(at(12, 10, 30))
    set_schedule(store, "report-03", expression="15 * * * *", clock=sim_clock)  # another process: earlier now
    pause_schedule(store, app, "report-04", clock=sim_clock)
    fetched.clear()
    run_until(sim_clock, at(13, 30), 60, clock)
    assert ["report-03", "report-04"] in fetched, fetched
    assert ledger(store, "report-03") == [(at(12, 15), "enqueued"), (at(13, 15), "enqueued")]
    assert ledger(store, "report-04") == [(at(13), "paused")]
    assert ledger(store, "report-05") == [(at(13), "enqueued")]
    assert_one_job_per_enqueued_occurrence(store)
