"""The doctor tells an operator's own actions from leftovers (issue 21 item 6), on both backends.

A trigger, re-run or backfill made through the CLI or the dashboard records its operator (via, user, terminal)
in the audit trail: the doctor reports it as ``info`` naming who did it. What still is a ``leftover-trigger``
warning: a fire that names no operator (a script, an old release, a cron entry calling the library), an
operator's command of an older version than the running clock, a CLI run without a terminal from a host where
no oncebeat process registered or repeating daily at one time, and a fire recorded after its schedule retired.
A run-time edit of the very definition the code has is the operator's too: info, not "another definition".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from oncebeat.app import App
from oncebeat.clock import ClockProcess, fire_occurrence
from oncebeat.doctor import DoctorReport, Finding, prune_audit, run_doctor
from oncebeat.provenance import Operator, Source, cli_operator, current_source, dashboard_operator
from oncebeat.queue import Queue
from oncebeat.schedule_admin import (
    backfill_schedule,
    rerun_occurrence,
    retire_schedule,
    set_schedule,
    trigger_schedule,
)
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

CHICAGO = "America/Chicago"
AT_THE_DESK = Operator(via="cli", user="ana", terminal=True)
UNATTENDED = Operator(via="cli", user="deploy", terminal=False)


def at(hour: int, minute: int = 0, *, day: int = 2) -> datetime:
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def daily_app() -> App:
    app = App()

    @app.task()
    def work(ctx: Any) -> None:
        pass

    app.schedule("daily", "0 8 * * *", tz=CHICAGO, task="work")
    return app


def source(host: str, pid: int, name: str, operator: Operator | None, *, kind: str = "cli",
           version: str = "0.1.0") -> Source:
    return Source(kind=kind, host=host, pid=pid, name=name, version=version, operator=operator)


def started_clock(store: Store, clock: SimulatedClock, app: App, version: str = "0.1.0") -> ClockProcess:
    """The deployment's clock, registered on host app-host (so an operator's shell there is on a known host)."""
    c = ClockProcess(app, store, clock=clock, source=Source(kind="clock", host="app-host", pid=10, name="clock.1",
                                                              version=version))
    c.start()
    return c


def leftovers(report: DoctorReport) -> list[Finding]:
    return report.by_code("leftover-trigger")


def test_operator_trigger_rerun_and_backfill_are_info_naming_who_did_them(store: Store,
                                                                          sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app)
    sim_clock.set(at(15))
    desk = source("app-host", 900, "oncebeat trigger", AT_THE_DESK)
    fire = trigger_schedule(store, app, "daily", source=desk, clock=sim_clock)
    Queue(store, clock=sim_clock, source=desk).cancel(fire.job_id or 0)
    sim_clock.advance(60)
    rerun = rerun_occurrence(store, fire.occurrence_id or 0, source=source("app-host", 901, "oncebeat occurrences",
                                                                             AT_THE_DESK), clock=sim_clock)
    backfill_schedule(store, app, "daily", at(0, day=1), at(23, day=1),
                      source=source("app-host", 902, "oncebeat backfill", AT_THE_DESK), clock=sim_clock)

    report = run_doctor(store, now=sim_clock.now(), definitions=app)
    found = leftovers(report)
    assert [f.severity for f in found] == ["info"] * 3, [f.summary for f in found]
    summaries = [f.summary for f in found]
    assert summaries[0] == ("schedule daily: triggered it 1 time by an operator through the CLI (oncebeat trigger on "
                            "app-host, user ana, from a terminal, v0.1.0)")
    assert summaries[1].startswith(f"schedule daily: re-ran occurrence {fire.occurrence_id} by an operator through "
                                   "the CLI (oncebeat occurrences on app-host, user ana")
    assert summaries[2].startswith("schedule daily: backfilled 1 occurrence by an operator through the CLI")
    operator_rows = [e for e in found[1].to_json()["evidence"] if e["kind"] == "note"]
    assert {k: operator_rows[0][k] for k in ("occurrence_id", "action", "via", "user", "terminal")} == {
        "occurrence_id": rerun.occurrence_id, "action": "re-ran", "via": "cli", "user": "ana", "terminal": True}
    assert "Nothing to do" in found[0].fix and "a shell on app-host" in found[0].fix
    assert report.exit_code == 0 and report.counts()["warning"] == 0
    # the operator is in the audit trail, next to the host, pid and version in the event's columns
    [event] = store.read("doctor_events", since=at(0), kinds=["occurrence.rerun"])
    assert (event["source_host"], event["source_pid"], event["source_version"]) == ("app-host", 901, "0.1.0")
    assert event["detail"]["operator"] == {"via": "cli", "user": "ana", "terminal": True}


def test_a_fire_naming_no_operator_stays_a_leftover_warning(store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app)
    sim_clock.set(at(15))
    # a script on the clock's own host calling the library (or an older oncebeat): no operator recorded
    trigger_schedule(store, app, "daily", source=source("app-host", 77, "python nightly.py", None), clock=sim_clock)
    [finding] = leftovers(run_doctor(store, now=sim_clock.now()))
    assert finding.severity == "warning"
    assert finding.summary.startswith("schedule daily was fired outside its schedule 1 time by cli python nightly.py "
                                      "on app-host (not a registered process")


def test_unattended_cli_from_an_unknown_host_is_a_leftover_but_from_a_terminal_it_is_the_operator(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app)
    sim_clock.set(at(15))
    trigger_schedule(store, app, "daily", source=source("old-box", 5, "oncebeat trigger", UNATTENDED), clock=sim_clock)
    sim_clock.advance(60)
    # `heroku run oncebeat trigger daily` (a one-off dyno: a host of its own, but a terminal)
    trigger_schedule(store, app, "daily", source=source("run-1234", 6, "run.1234", AT_THE_DESK), clock=sim_clock)

    found = leftovers(run_doctor(store, now=sim_clock.now()))
    by_host = {f.summary.split(" on ")[1].split(" ")[0].rstrip(","): f for f in found}
    assert by_host["old-box"].severity == "warning"
    assert ("not taken as an operator's action: run by the CLI without a terminal (user deploy) on host old-box, "
            "where no oncebeat process ever registered") in by_host["old-box"].summary
    assert by_host["run-1234"].severity == "info" and "user ana, from a terminal" in by_host["run-1234"].summary


def test_unattended_cli_repeating_at_one_time_each_day_is_a_cron_entry_even_on_a_known_host(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    clock = started_clock(store, sim_clock, app)
    for day in (2, 3, 4):
        sim_clock.set(at(14, day=day))
        clock.tick()
        sim_clock.set(at(14, 5, day=day))  # 08:05 CST every day, from a crontab on the clock's host
        trigger_schedule(store, app, "daily", source=source("app-host", 40 + day, "oncebeat trigger", UNATTENDED),
                         clock=sim_clock)
    [finding] = leftovers(run_doctor(store, now=sim_clock.now()))
    assert finding.severity == "warning"
    assert "fired outside its schedule 3 times by cli oncebeat trigger on app-host" in finding.summary
    assert "looks like a leftover cron entry" in finding.summary
    assert "without a terminal at about the same local time on several days" in finding.summary


def test_an_operators_command_of_an_older_version_than_the_clock_is_a_leftover(store: Store,
                                                                              sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app, version="0.2.0")
    sim_clock.set(at(15))
    trigger_schedule(store, app, "daily", source=source("app-host", 9, "oncebeat trigger", AT_THE_DESK,
                                                          version="0.1.0"), clock=sim_clock)
    [finding] = leftovers(run_doctor(store, now=sim_clock.now()))
    assert finding.severity == "warning"
    assert "its version v0.1.0 is older than the newest clock or worker (v0.2.0)" in finding.summary


def test_an_operator_fire_recorded_after_the_schedule_retired_is_a_leftover(store: Store,
                                                                            sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app)
    sim_clock.set(at(15))
    assert retire_schedule(store, "daily", clock=sim_clock)
    sim_clock.advance(60)
    definition = app.schedules["daily"]
    old = source("app-host", 3, "oncebeat trigger", AT_THE_DESK)
    with store.transaction() as tx:  # what an old release that ignores retirement does
        fire_occurrence(tx, queue=Queue(store, clock=sim_clock, source=old), definition=definition,
                        schedule=definition.schedule(), instant=sim_clock.now(), outcome="manual",
                        source=old, now=sim_clock.now())
    found = leftovers(run_doctor(store, now=sim_clock.now()))
    fired = next(f for f in found if "fired outside its schedule" in f.summary)
    assert fired.severity == "warning" and "recorded after its schedule was retired" in fired.summary
    assert any(f.severity == "error" and "occurrences recorded after it was retired" in f.summary for f in found)


def test_the_entry_points_record_their_operator() -> None:
    cli = cli_operator()
    assert cli.via == "cli" and isinstance(cli.terminal, bool)
    assert dashboard_operator() == Operator(via="dashboard", user="operator session", terminal=None)
    assert current_source("cli", operator=cli).operator is cli
    assert current_source("cli").operator is None, "a library call names no operator"
    assert Operator.from_detail({"via": "dashboard", "user": "operator session"}) == dashboard_operator()
    assert Operator.from_detail({"via": "cron"}) is None and Operator.from_detail(None) is None


def test_a_run_time_edit_of_this_codes_own_definition_is_info_not_another_definition(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app)
    sim_clock.set(at(15))
    edit = set_schedule(store, "daily", expression="30 9 * * *",
                        source=source("app-host", 12, "oncebeat schedules", AT_THE_DESK), clock=sim_clock)
    assert edit["changed"]
    [finding] = leftovers(run_doctor(store, now=sim_clock.now(), definitions=app))
    assert finding.severity == "info"
    assert finding.summary == ("schedule daily runs a run-time edit (version 2: 30 9 * * * in America/Chicago by cli "
                               "oncebeat schedules pid 12 on app-host (v0.1.0), operator cli, user ana, from a "
                               "terminal) that overrides this code's definition (0 8 * * * in America/Chicago)")
    # code that defines the schedule otherwise than the code the edit overrode: still another definition
    other = App()
    other.task("work")(lambda ctx: None)
    other.schedule("daily", "0 7 * * *", tz=CHICAGO, task="work")
    [differs] = leftovers(run_doctor(store, now=sim_clock.now(), definitions=other))
    assert differs.severity == "warning" and "another definition of daily" in differs.summary


def test_a_fire_whose_audit_event_was_pruned_is_history_not_a_leftover(store: Store,
                                                                      sim_clock: SimulatedClock) -> None:
    app = daily_app()
    started_clock(store, sim_clock, app)
    sim_clock.set(at(15))
    trigger_schedule(store, app, "daily", source=source("app-host", 900, "oncebeat trigger", AT_THE_DESK),
                     clock=sim_clock)
    sim_clock.advance(40 * 86400)
    assert prune_audit(store, 30 * 86400, now=sim_clock.now()) > 0  # the trigger's event is gone, its row stays
    trigger_schedule(store, app, "daily", source=source("cron-box", 66, "crontab", None), clock=sim_clock)

    found = {f.summary.split(" by ")[1].split(" ")[1]: f for f in leftovers(run_doctor(store, now=sim_clock.now()))}
    assert found["oncebeat"].severity == "info"
    assert "who did it is no longer known: its audit event was pruned" in found["oncebeat"].summary
    assert found["crontab"].severity == "warning", "a fire after the pruning is judged as always"
