"""The clock's set-based fire, on both backends.

When many schedules each have one on-time instant (10,000 reports due at 08:00), the clock records
their occurrences and jobs with a few statements per batch instead of several per schedule. The
ledger still decides: whatever it does not confirm — a schedule paused, resumed or edited by another
process since the clock read it, an instant another clock recorded — goes the one-schedule way, so
the set-based path never fires what that path would not.
"""

from __future__ import annotations

import secrets
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from oncebeat import clock as clock_module
from oncebeat.app import App
from oncebeat.clock import ClockProcess, Fire
from oncebeat.errors import StoreError
from oncebeat.schedule_admin import set_schedule
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock

KEYS = [f"report-{i:02d}" for i in range(30)]


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 3, 1, hour, minute, second, tzinfo=UTC)


def many_app(keys: list[str] = KEYS) -> App:
    app = App()

    @app.task(priority=3, max_attempts=7)
    def report(ctx: Any, **args: Any) -> None:
        pass

    for i, key in enumerate(keys):
        app.schedule(key, "0 * * * *", tz="UTC" if i % 2 else "America/Chicago", task="report", args={"n": i})
    return app


def watch(store: Store) -> list[str]:
    """The named queries ``store`` runs from now on, in order (the real statements still run)."""
    seen: list[str] = []
    store.before_statement = seen.append
    return seen


def occurrences(store: Store) -> list[dict[str, Any]]:
    return store.read("list_occurrences", schedule_key=None)


def jobs(store: Store) -> dict[int, dict[str, Any]]:
    return {j["id"]: j for j in store.read("list_jobs", state=None, task=None, limit=100_000)}


def events(store: Store, kind: str) -> list[dict[str, Any]]:
    return store.read("list_events", subject=None, kind=kind, since=datetime(2000, 1, 1, tzinfo=UTC))


def started(app: App, store: Store, sim_clock: SimulatedClock) -> ClockProcess:
    sim_clock.set(at(12, 30))
    clock = ClockProcess(app, store, clock=sim_clock)
    clock.start()
    return clock


def test_many_on_time_schedules_are_recorded_set_based_with_one_linked_job_each(
        store: Store, sim_clock: SimulatedClock) -> None:
    clock = started(many_app(), store, sim_clock)
    seen = watch(store)
    sim_clock.set(at(13, 0, 2))
    fires = clock.tick()
    assert "fire_on_time" in seen and "insert_occurrence" not in seen, "not one statement per schedule"
    assert [f.schedule_key for f in fires] == KEYS, "fires come back in the order the schedules were due"
    assert all(f.inserted and f.outcome == "enqueued" and f.fire_at == at(13) for f in fires)
    occ, by_id = occurrences(store), jobs(store)
    assert len(occ) == len(by_id) == len(KEYS)
    for o in occ:
        job = by_id[o["job_id"]]
        assert job["occurrence_id"] == o["id"]
        assert job["args"] == {"n": KEYS.index(o["schedule_key"])}
        assert (job["task"], job["priority"], job["max_attempts"], job["state"]) == ("report", 3, 7, "available")
    chicago = next(o for o in occ if o["schedule_key"] == "report-00")
    assert (chicago["local_fire_at"], chicago["tz"]) == ("2026-03-01T07:00:00-06:00", "America/Chicago")
    assert str(chicago["business_date"]) == "2026-03-01"
    # the next hour again, from the cursor the set-based fire left
    sim_clock.set(at(14, 0, 1))
    assert len([f for f in clock.tick() if f.inserted]) == len(KEYS)
    assert len(occurrences(store)) == len(jobs(store)) == 2 * len(KEYS)


def test_each_occurrence_and_its_run_name_each_other_from_their_inserts_and_no_job_id_is_used_twice(
        store: Store, sim_clock: SimulatedClock) -> None:
    # A job enqueued and deleted before the fire: its id was handed out (PostgreSQL's sequence, SQLite's
    # AUTOINCREMENT), so no run may take it.
    clock = started(many_app(), store, sim_clock)
    with store.transaction() as tx:
        gone = clock.queue.enqueue("report", tx=tx)
        assert gone is not None
        tx.execute("DELETE FROM jobs WHERE id = " + ("%s" if store.backend == "postgres" else "?"), (gone,))
    seen = watch(store)
    sim_clock.set(at(13, 0, 2))
    fires = clock.tick()
    assert len(fires) == len(KEYS) and all(f.inserted for f in fires)
    assert "enqueue_runs_select" in seen
    assert not [q for q in seen if q.startswith(("set_", "update_"))], f"a row updated after its insert: {seen}"
    occ, by_id = occurrences(store), jobs(store)
    assert sorted(by_id) == sorted(o["job_id"] for o in occ) and min(by_id) > gone
    for o in occ:
        assert (by_id[o["job_id"]]["run_of"], by_id[o["job_id"]]["occurrence_id"]) == (o["id"], o["id"])
    assert {f.job_id for f in fires} == set(by_id)
    with store.transaction() as tx:  # later jobs take later ids
        after = clock.queue.enqueue("report", tx=tx)
    assert after is not None and after > max(by_id)


def test_a_schedule_paused_by_another_process_is_decided_one_by_one(store: Store,
                                                                     sim_clock: SimulatedClock) -> None:
    app = many_app()
    running = started(app, store, sim_clock)
    sim_clock.set(at(12, 59, 50))
    running.tick()
    ClockProcess(app, store, clock=sim_clock).set_state("report-05", "paused")  # e.g. `schedules pause`
    ClockProcess(app, store, clock=sim_clock).set_state("report-06", "paused")
    sim_clock.set(at(13, 0, 1))
    ClockProcess(app, store, clock=sim_clock).set_state("report-06", "active")  # resumed after 13:00
    fires = running.tick()
    outcome = {f.schedule_key: f.outcome for f in fires}
    assert outcome["report-05"] == "paused"
    assert "report-06" not in outcome, "resumed after the instant: it counts from the resume"
    assert sum(1 for o in outcome.values() if o == "enqueued") == len(KEYS) - 2
    assert len(jobs(store)) == len(KEYS) - 2


def test_a_run_time_edit_by_another_process_is_decided_one_by_one(store: Store, sim_clock: SimulatedClock) -> None:
    app = many_app()
    running = started(app, store, sim_clock)
    sim_clock.set(at(12, 59, 50))
    running.tick()
    set_schedule(store, "report-01", expression="30 * * * *", clock=sim_clock)
    sim_clock.set(at(13, 0, 1))
    fires = running.tick()
    assert "report-01" not in {f.schedule_key for f in fires}, "the edited schedule now fires at half past"
    assert len(fires) == len(KEYS) - 1
    sim_clock.set(at(13, 30, 1))
    assert [(f.schedule_key, f.fire_at) for f in running.tick()] == [("report-01", at(13, 30))]


def test_an_instant_another_clock_recorded_first_is_neither_fired_again_nor_reported(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = many_app()
    first, second = started(app, store, sim_clock), ClockProcess(app, store, clock=sim_clock)
    second.start()
    sim_clock.set(at(13, 0, 1))
    assert len(first.tick()) == len(KEYS)
    assert second.tick() == [], "the ledger already holds every instant"
    assert len(occurrences(store)) == len(jobs(store)) == len(KEYS)
    assert events(store, "occurrence.duplicate_rejected") == []


def test_clock_that_loses_the_race_in_the_set_based_fire_audits_each_rejected_duplicate(
        db_url: str, store: Store, sim_clock: SimulatedClock) -> None:
    if store.backend != "postgres":
        pytest.skip("SQLite serialises writers: a second clock reads the ledger only after the first committed")
    app = many_app()
    # The loser's sessions carry a name of their own: other tests (parallel test processes) share the database.
    tag = f"ob_loser_{secrets.token_hex(4)}"
    winner_store, loser_store = open_store(db_url), open_store(f"{db_url}&application_name={tag}")
    try:
        winner, loser = (ClockProcess(app, winner_store, clock=sim_clock),
                         ClockProcess(app, loser_store, clock=sim_clock))
        sim_clock.set(at(12, 30))
        winner.start()
        loser.start()
        sim_clock.set(at(13, 0, 1))
        loser_fires: list[Fire] = []
        racing: list[threading.Thread] = []

        def loser_checks_before_winner_commits(query: str) -> None:
            # The winner has inserted its occurrences but not committed: the loser's check passes (it cannot
            # see them yet) and its insert waits on the unique index until the winner commits.
            if query == "enqueue_runs_select" and not racing:
                racing.append(threading.Thread(target=lambda: loser_fires.extend(loser.tick())))
                racing[0].start()
                for _ in range(200):
                    with store.transaction() as tx:
                        waiting = tx.execute("SELECT count(*) AS n FROM pg_stat_activity "
                                             "WHERE wait_event_type = 'Lock' AND application_name = %s", (tag,))
                    if waiting[0]["n"]:
                        return
                    racing[0].join(timeout=0.05)
                raise AssertionError("the loser's insert never waited on the winner's")

        winner_store.before_statement = loser_checks_before_winner_commits
        winner_fires = winner.tick()
        racing[0].join(timeout=30)
    finally:
        winner_store.close()
        loser_store.close()
    assert len(winner_fires) == len(KEYS) and all(f.inserted and f.job_id for f in winner_fires)
    assert len(loser_fires) == len(KEYS) and all(not f.inserted and f.job_id is None for f in loser_fires)
    assert len(occurrences(store)) == len(jobs(store)) == len(KEYS)
    rejected = events(store, "occurrence.duplicate_rejected")
    assert len(rejected) == len(KEYS)
    assert all(e["process_id"] == loser.process_id for e in rejected)


def test_a_waiting_clock_prepares_the_instants_due_within_its_horizon_once(store: Store,
                                                                           sim_clock: SimulatedClock) -> None:
    app = many_app()
    app.schedule("far", "0 0 * * *", tz="UTC", task="report")  # daily: far outside a 120 s horizon
    clock = ClockProcess(app, store, clock=sim_clock)
    clock.start()  # 12:00 on the simulated clock: the reports are due at 13:00
    sim_clock.set(at(12, 58, 30))
    assert clock.prepare_ahead(5.0) == len(KEYS), "each report due within 120 s is prepared, the daily one is not"
    assert clock.prepare_ahead(5.0) == 0, "a second pass within PREPARE_EVERY seconds does nothing"
    assert "far" not in clock._prepared
    sim_clock.set(at(13, 0, 1))
    seen = watch(store)
    fires = clock.tick()
    assert sorted(f.schedule_key for f in fires) == KEYS and "fire_on_time" in seen
    assert all(f.inserted and f.job_id is not None for f in fires)


def test_a_failed_batch_leaves_the_batches_committed_before_it_fired_once_and_the_rest_to_the_next_tick(
        store: Store, sim_clock: SimulatedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    # The bookkeeping of committed batches (cursors, fire counts) runs once all are committed; a batch that fails
    # after others committed must not leave those to fire again, nor lose its own and the later ones.
    monkeypatch.setattr(clock_module, "FIRE_SET_BATCH", 10)
    clock = started(many_app(), store, sim_clock)
    calls: list[str] = []

    def second_batch_fails(query: str) -> None:
        if query == "fire_on_time":
            calls.append(query)
            if len(calls) == 2:
                raise StoreError("the database went away")

    store.before_statement = second_batch_fails
    sim_clock.set(at(13, 0, 1))
    with pytest.raises(StoreError):
        clock.tick()
    first = sorted(o["schedule_key"] for o in occurrences(store))
    # SQLite stops at the failed batch; PostgreSQL runs the batches in two threads, so the other two commit
    committed = 20 if store.backend == "postgres" else 10
    assert len(first) == committed and len(jobs(store)) == committed, "the other batches committed, with their jobs"
    assert clock.fires == committed
    assert all(clock._next[k] == at(14) for k in first), "the committed batches' cursors moved"
    assert all(clock._next[k] == at(13) for k in KEYS if k not in first), "the rest are still due"
    store.before_statement = None
    sim_clock.set(at(13, 0, 3))
    fires = clock.tick()
    assert sorted(f.schedule_key for f in fires) == sorted(set(KEYS) - set(first))
    assert all(f.inserted for f in fires) and clock.fires == len(KEYS)
    occ = occurrences(store)
    assert len(occ) == len(jobs(store)) == len(KEYS) and len({o["schedule_key"] for o in occ}) == len(KEYS)


def test_a_run_whose_job_id_is_taken_fails_its_batch_and_no_occurrence_stays_without_its_job(
        store: Store, sim_clock: SimulatedClock) -> None:
    # The runs go in with a plain insert (no ON CONFLICT): their ids were just drawn from the jobs' sequence. A
    # database where one is taken anyway (a sequence set back) fails the batch instead of skipping the job.
    if store.backend != "postgres":
        pytest.skip("SQLite draws the ids after the highest one held: none can be taken")
    clock = started(many_app(), store, sim_clock)
    with store.transaction() as tx:
        taken = clock.queue.enqueue("report", tx=tx)
        assert taken is not None
        tx.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s, false)", (taken,))  # next: taken
    sim_clock.set(at(13, 0, 1))
    with pytest.raises(StoreError):
        clock.tick()
    assert occurrences(store) == [] and list(jobs(store)) == [taken], "the batch rolled back whole"
    with store.transaction() as tx:
        tx.execute("SELECT setval(pg_get_serial_sequence('jobs', 'id'), %s)", (taken,))
    sim_clock.set(at(13, 0, 3))
    fires = clock.tick()
    assert len(fires) == len(KEYS) and all(f.inserted for f in fires)
    occ, by_id = occurrences(store), jobs(store)
    assert len(occ) == len(KEYS) and len(by_id) == len(KEYS) + 1
    assert all(by_id[o["job_id"]]["run_of"] == o["id"] for o in occ)


def test_on_postgresql_the_batches_of_one_burst_are_recorded_in_two_transactions_at_once(
        store: Store, sim_clock: SimulatedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    if store.backend != "postgres":
        pytest.skip("SQLite has one writer: its batches go one after another")
    monkeypatch.setattr(clock_module, "FIRE_SET_BATCH", 5)
    clock = started(many_app(), store, sim_clock)
    threads: set[int] = set()
    calls: list[int] = []
    both = threading.Barrier(2, timeout=10)

    def meet(query: str) -> None:
        if query == "fire_on_time":
            threads.add(threading.get_ident())
            calls.append(1)
            if len(calls) <= 2:
                try:
                    both.wait()  # the first two batches are both inside their transactions here
                except threading.BrokenBarrierError:
                    pass

    store.before_statement = meet
    sim_clock.set(at(13, 0, 1))
    fires = clock.tick()
    store.before_statement = None
    assert len(threads) == 2 and not both.broken, "two batches were open at once"
    assert [f.schedule_key for f in fires] == KEYS and all(f.inserted for f in fires)
    occ, by_id = occurrences(store), jobs(store)
    assert len(occ) == len(by_id) == len(KEYS) and len({o["schedule_key"] for o in occ}) == len(KEYS)
    assert all(by_id[o["job_id"]]["run_of"] == o["id"] for o in occ)
