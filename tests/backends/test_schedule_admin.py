"""Run-time schedule management (issue 12 item 4) on both backends: edits every clock picks up without a
restart, which wins between code and a run-time edit, retire, make-up runs, backfill over recorded
instants, and one audit event per pause.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import PERIOD_SERVED, ClockProcess
from oncebeat.errors import OncebeatError, ScheduleError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.schedule_admin import rerun_occurrence, retire_schedule, revert_schedule, set_schedule
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock


def at(hour: int, minute: int = 0, *, day: int = 1) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def app_with(expression: str = "0 * * * *", key: str = "report", **options: Any) -> App:
    app = App()

    @app.task()
    def work(ctx: Any) -> None:
        pass

    app.schedule(key, expression, tz="UTC", task="work", **options)
    return app


def ledger(store: Store, key: str = "report") -> list[tuple[datetime, str]]:
    return [(r["fire_at"], r["outcome"]) for r in store.read("list_occurrences", schedule_key=key)]


def events(store: Store, kind: str) -> list[dict[str, Any]]:
    return store.read("list_events", subject=None, kind=kind, since=datetime(2000, 1, 1, tzinfo=UTC))


def run_until(sim_clock: SimulatedClock, end: datetime, step: float, *clocks: ClockProcess) -> None:
    while sim_clock.now() < end:
        sim_clock.advance(step)
        for c in clocks:
            c.tick()


def operator() -> Any:
    return current_source("cli")


def test_run_time_edit_is_picked_up_by_a_running_clock_without_a_restart(store: Store,
                                                                         sim_clock: SimulatedClock) -> None:
    running = ClockProcess(app_with(), store, clock=sim_clock)
    running.start()
    sim_clock.set(at(12, 30))
    running.tick()
    edit = set_schedule(store, "report", expression="45 * * * *", source=operator(), clock=sim_clock)
    assert (edit["changed"], edit["version"], edit["new"]["expression"]) == (True, 2, "45 * * * *")
    run_until(sim_clock, at(14, 50), 60, running)

    assert ledger(store) == [(at(12, 45), "enqueued"), (at(13, 45), "enqueued"), (at(14, 45), "enqueued")]
    [row] = store.read("get_schedule", key="report")
    assert (row["origin"], row["expression"], row["version"]) == ("runtime", "45 * * * *", 2)
    [changed] = events(store, "schedule.changed")
    assert changed["detail"]["origin"] == "runtime" and changed["source_kind"] == "cli"


def test_code_keeps_a_run_time_edit_until_a_deploy_changes_the_codes_definition(
        store: Store, sim_clock: SimulatedClock) -> None:
    ClockProcess(app_with(), store, clock=sim_clock).start()
    set_schedule(store, "report", expression="45 * * * *", catchup="none", source=operator(), clock=sim_clock)
    sim_clock.advance(60)
    restarted = ClockProcess(app_with(), store, clock=sim_clock)  # the same code restarted: the edit stays
    assert restarted.start() == [] and restarted.sync().changed == []
    [row] = store.read("get_schedule", key="report")
    assert (row["origin"], row["expression"], row["catchup"]) == ("runtime", "45 * * * *", "none")
    run_until(sim_clock, at(12, 50), 60, restarted)
    assert ledger(store) == [(at(12, 45), "enqueued")]

    sim_clock.advance(60)
    deployed = ClockProcess(app_with("15 * * * *"), store, clock=sim_clock)  # a deploy changes the code
    assert deployed.sync().changed == ["report"]
    [row] = store.read("get_schedule", key="report")
    assert (row["origin"], row["expression"], row["catchup"], row["version"]) == ("code", "15 * * * *", "latest", 3)
    run_until(sim_clock, at(13, 20), 60, deployed)
    assert ledger(store)[-1] == (at(13, 15), "enqueued")


def test_run_time_edit_never_serves_a_business_day_twice(store: Store, sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(app_with("0 13 * * *"), store, clock=sim_clock)
    clock.start()
    run_until(sim_clock, at(13, 30), 300, clock)
    set_schedule(store, "report", expression="0 15 * * *", source=operator(), clock=sim_clock)
    run_until(sim_clock, at(15, 30, day=2), 300, clock)
    rows = store.read("list_occurrences", schedule_key="report")
    assert [(r["fire_at"], r["outcome"], r["reason"]) for r in rows] == [
        (at(13), "enqueued", None), (at(15), "coalesced", PERIOD_SERVED), (at(15, day=2), "enqueued", None)]


def test_retired_at_run_time_never_fires_again_on_any_clock(store: Store, sim_clock: SimulatedClock) -> None:
    running = ClockProcess(app_with(), store, clock=sim_clock)
    running.start()
    sim_clock.set(at(12, 30))
    assert retire_schedule(store, "report", source=operator(), clock=sim_clock) is True
    assert retire_schedule(store, "report", source=operator(), clock=sim_clock) is False
    restarted = ClockProcess(app_with(), store, clock=sim_clock)
    assert restarted.sync().ignored_retired == ["report"]
    run_until(sim_clock, at(15, 30), 300, running, restarted)
    assert ledger(store) == []
    with pytest.raises(OncebeatError, match="retired"):
        set_schedule(store, "report", expression="5 * * * *", clock=sim_clock)


def test_bad_run_time_edits_are_refused_with_the_field_and_change_nothing(store: Store,
                                                                          sim_clock: SimulatedClock) -> None:
    ClockProcess(app_with(), store, clock=sim_clock).start()
    with pytest.raises(ScheduleError, match="minute"):
        set_schedule(store, "report", expression="61 * * * *", clock=sim_clock)
    with pytest.raises(ScheduleError, match="Mars/Olympus"):
        set_schedule(store, "report", tz="Mars/Olympus", clock=sim_clock)
    with pytest.raises(OncebeatError, match="catchup must be one of none, latest, all"):
        set_schedule(store, "report", catchup="some", clock=sim_clock)
    with pytest.raises(OncebeatError, match=r"no schedule 'nightly' in the database \(known: report\)"):
        set_schedule(store, "nightly", expression="0 1 * * *", clock=sim_clock)
    with pytest.raises(OncebeatError, match="nothing to change"):
        set_schedule(store, "report", clock=sim_clock)
    assert set_schedule(store, "report", expression="0 * * * *", clock=sim_clock)["changed"] is False
    [row] = store.read("get_schedule", key="report")
    assert (row["origin"], row["version"]) == ("code", 1)


def test_rerun_makes_a_manual_run_for_the_original_business_date_linked_to_it(store: Store,
                                                                               sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(app_with("0 23 * * *"), store, clock=sim_clock)
    clock.start()
    run_until(sim_clock, at(23, 30), 600, clock)
    [original] = store.read("list_occurrences", schedule_key="report")
    queue = Queue(store, clock=sim_clock, source=operator())
    with pytest.raises(OncebeatError, match=f"already has run {original['job_id']} available; wait for it or cancel"):
        rerun_occurrence(store, original["id"], clock=sim_clock)
    assert queue.cancel(original["job_id"]) is True
    sim_clock.set(at(9, day=2))

    fire = rerun_occurrence(store, original["id"], source=operator(), clock=sim_clock)
    assert (fire.outcome, fire.fire_at, fire.job_id is not None) == ("manual", at(9, day=2), True)
    rerun = store.read("get_occurrence", id=fire.occurrence_id)[0]
    assert (rerun["rerun_of"], rerun["business_date"], rerun["source_kind"]) == (
        original["id"], date(2026, 3, 1), "cli")
    assert rerun["reason"].startswith(f"rerun of occurrence {original['id']} (enqueued, 2026-03-01T23:00:00+00:00)")
    [job] = [j for j in store.read("list_jobs", state=None, task=None, limit=10) if j["id"] == fire.job_id]
    assert (job["occurrence_id"], job["state"]) == (fire.occurrence_id, "available")
    [event] = events(store, "occurrence.rerun")
    assert event["detail"]["rerun_of"] == original["id"]
    run_until(sim_clock, at(23, 30, day=2), 600, clock)
    assert ledger(store)[-1] == (at(23, day=2), "enqueued"), "a make-up run does not use up the next day"
    with pytest.raises(OncebeatError, match="no occurrence 999999"):
        rerun_occurrence(store, 999999, clock=sim_clock)


def test_backfill_over_recorded_instants_says_what_is_there(store: Store, sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(app_with(), store, clock=sim_clock)
    clock.start()
    run_until(sim_clock, at(14, 30), 600, clock)
    fires = clock.backfill("report", at(13), at(14))
    assert [f.inserted for f in fires] == [False, False]
    [first, _] = fires
    assert first.existing is not None
    assert first.existing.startswith("already in the ledger: enqueued by clock")
    assert "job" in first.existing and "available" in first.existing
    assert "already in the ledger: enqueued" in first.describe()


def test_a_paused_schedule_writes_one_audit_event_per_pause_not_one_per_slot(store: Store,
                                                                              sim_clock: SimulatedClock) -> None:
    clock = ClockProcess(app_with("*/5 * * * *"), store, clock=sim_clock)
    clock.start()
    clock.set_state("report", "paused")
    run_until(sim_clock, at(15), 300, clock)
    assert len(ledger(store)) == 36 and {o for _, o in ledger(store)} == {"paused"}
    assert len(events(store, "schedule.paused")) == 1
    assert events(store, "occurrence.paused") == []


def test_the_admin_verbs_trigger_pause_resume_backfill_and_describe_on_a_fresh_database(
        store: Store, sim_clock: SimulatedClock) -> None:
    from oncebeat.schedule_admin import (
        backfill_schedule,
        describe_schedule,
        pause_schedule,
        resume_schedule,
        trigger_schedule,
    )

    app = app_with()
    sim_clock.set(at(12, 30))
    fire = trigger_schedule(store, app, "report", source=operator(), clock=sim_clock)  # syncs first: no clock ran
    assert fire.inserted and fire.outcome == "manual" and fire.job_id is not None
    assert pause_schedule(store, app, "report", clock=sim_clock) is True
    assert pause_schedule(store, app, "report", clock=sim_clock) is False  # already paused
    assert describe_schedule(store, app, "report", now=sim_clock.now())["next"] == []
    assert resume_schedule(store, app, "report", clock=sim_clock) is True
    fires = backfill_schedule(store, app, "report", at(9), at(11), clock=sim_clock)
    assert [(f.fire_at, f.inserted) for f in fires] == [(at(9), True), (at(10), True), (at(11), True)]
    described = describe_schedule(store, app, "report", now=sim_clock.now(), count=2, history=10)
    assert [n["utc"] for n in described["next"]] == ["2026-03-01T13:00:00+00:00", "2026-03-01T14:00:00+00:00"]
    assert sorted(o["outcome"] for o in described["occurrences"]) == ["backfilled"] * 3 + ["manual"]
    with pytest.raises(OncebeatError, match="no schedule 'nope'"):
        describe_schedule(store, app, "nope", now=sim_clock.now())
    with pytest.raises(OncebeatError, match="no schedule 'nope'"):
        pause_schedule(store, app, "nope", clock=sim_clock)


def test_revert_to_code_undoes_a_run_time_edit_from_now_on_and_a_running_clock_picks_it_up(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = app_with()
    running = ClockProcess(app, store, clock=sim_clock)
    running.start()
    sim_clock.set(at(12, 30))
    running.tick()
    set_schedule(store, "report", expression="45 * * * *", catchup="none", source=operator(), clock=sim_clock)
    run_until(sim_clock, at(13, 50), 60, running)
    reverted = revert_schedule(store, app, "report", source=operator(), clock=sim_clock)
    assert (reverted["changed"], reverted["version"]) == (True, 3)
    assert reverted["old"]["expression"] == "45 * * * *" and reverted["new"]["expression"] == "0 * * * *"
    [row] = store.read("get_schedule", key="report")
    assert (row["origin"], row["expression"], row["catchup"], row["code_hash"]) == ("code", "0 * * * *", "latest",
                                                                                    None)
    run_until(sim_clock, at(15, 10), 60, running)
    # 12:45 and 13:45 under the edit; then the code's hours from the revert on (13:50), never an earlier one
    assert ledger(store) == [(at(12, 45), "enqueued"), (at(13, 45), "enqueued"), (at(14), "enqueued"),
                             (at(15), "enqueued")]
    [event] = events(store, "schedule.reverted")
    assert event["detail"]["old"]["expression"] == "45 * * * *" and event["source_kind"] == "cli"
    again = revert_schedule(store, app, "report", source=operator(), clock=sim_clock)
    assert again["changed"] is False and len(events(store, "schedule.reverted")) == 1
    restarted = ClockProcess(app, store, clock=sim_clock)  # the same code restarted: nothing to replace
    assert restarted.sync().changed == []
    with pytest.raises(OncebeatError, match="not defined in the code"):
        revert_schedule(store, App(), "report", source=operator(), clock=sim_clock)
    retire_schedule(store, "report", source=operator(), clock=sim_clock)
    with pytest.raises(OncebeatError, match="retired"):
        revert_schedule(store, app, "report", source=operator(), clock=sim_clock)
