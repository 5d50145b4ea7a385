"""Overlap policy per schedule (issue 12 item 5) on both backends: whether a run may start while the previous
run of the same schedule (scheduled, manual, backfilled or re-run) is unfinished.

The scenario: an every-minute schedule whose first run lasts two and a half periods. While it runs, the
clock fires two more instants, an operator triggers a manual run, and a second worker drains the queue
(it stands for a worker process running beside the first one). Under each policy, the ledger's outcomes,
the number of job bodies started and the peak number of bodies running at once are what the policy says.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.clock import HELD_UNTIL, OVERLAP_FULL, OVERLAP_RUNNING, ClockProcess, release_buffered
from oncebeat.errors import ConfigError, OncebeatError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.schedule_admin import rerun_occurrence, set_schedule
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock, SystemClock
from oncebeat.worker import Worker

KEY = "digest"


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 3, 1, 12, minute, second, tzinfo=UTC)


class Scenario:
    """One every-minute schedule, one clock, two workers; the first run's body outlasts two periods."""

    def __init__(self, store: Store, sim_clock: SimulatedClock, overlap: str) -> None:
        self.store, self.sim = store, sim_clock
        self.started: list[int] = []
        self.active = 0
        self.peak = 0
        app = App()

        @app.task()
        def digest(ctx: Any) -> None:
            self.started.append(ctx.job.id)
            self.active += 1
            self.peak = max(self.peak, self.active)
            try:
                if len(self.started) == 1:
                    self.long_first_run()
            finally:
                self.active -= 1

        app.schedule(KEY, "every 1m", tz="UTC", task="digest", overlap=overlap)
        self.clock = ClockProcess(app, store, clock=sim_clock)
        self.worker = Worker(app, store, clock=sim_clock, source=current_source("worker", name="worker.1"))
        self.other = Worker(app, store, clock=sim_clock, source=current_source("worker", name="worker.2"))

    def long_first_run(self) -> None:
        self.sim.set(at(2, 30))
        self.clock.tick()  # 12:02, 30 s late: on time (misfire grace 60 s)
        self.clock.trigger(KEY)  # a manual run at 12:02:30
        self.sim.set(at(3, 30))
        self.clock.tick()  # 12:03
        self.other.drain()  # a second worker takes whatever may start now

    def run(self) -> None:
        self.sim.set(at(0, 30))
        self.clock.start()
        self.sim.set(at(1))
        self.clock.tick()  # 12:01: the long run
        self.worker.drain()  # runs it (and, inside it, everything above); completes it
        self.clock.tick()  # 12:03:30: a held run is released now that the long one finished
        self.worker.drain()
        self.sim.set(at(4))
        self.clock.tick()  # 12:04: nothing runs any more, so it runs under every policy
        self.worker.drain()

    def ledger(self) -> list[tuple[str, str, str | None, bool]]:
        """(UTC time, outcome, reason, has a job) of each occurrence, oldest first."""
        return [(r["fire_at"].astimezone(UTC).strftime("%H:%M:%S"), r["outcome"], r["reason"],
                 r["job_id"] is not None) for r in self.store.read("list_occurrences", schedule_key=KEY)]


def test_allow_runs_every_occurrence_even_while_the_previous_one_runs(store: Store,
                                                                       sim_clock: SimulatedClock) -> None:
    s = Scenario(store, sim_clock, "allow")
    s.run()
    assert s.ledger() == [("12:01:00", "enqueued", None, True), ("12:02:00", "enqueued", None, True),
                          ("12:02:30", "manual", None, True), ("12:03:00", "enqueued", None, True),
                          ("12:04:00", "enqueued", None, True)]
    assert (len(s.started), s.peak) == (5, 2)  # today's behaviour: the second worker ran three beside the first


def test_skip_records_each_occurrence_that_meets_a_running_run_and_never_runs_two(
        store: Store, sim_clock: SimulatedClock) -> None:
    s = Scenario(store, sim_clock, "skip")
    s.run()
    assert s.ledger() == [("12:01:00", "enqueued", None, True), ("12:02:00", "coalesced", OVERLAP_RUNNING, False),
                          ("12:02:30", "manual", OVERLAP_RUNNING, False),
                          ("12:03:00", "coalesced", OVERLAP_RUNNING, False), ("12:04:00", "enqueued", None, True)]
    assert (len(s.started), s.peak) == (2, 1)
    [coalesced, manual, _] = [e for e in store.read("list_events", subject=None, kind=None,
                                                    since=datetime(2000, 1, 1, tzinfo=UTC))
                              if e["kind"] in ("occurrence.coalesced", "occurrence.manual")]
    assert coalesced["detail"]["reason"] == OVERLAP_RUNNING and manual["detail"]["job_id"] is None


def test_buffer_one_holds_one_run_until_the_running_one_finishes_and_skips_the_rest(
        store: Store, sim_clock: SimulatedClock) -> None:
    s = Scenario(store, sim_clock, "buffer_one")
    s.run()
    assert s.ledger() == [("12:01:00", "enqueued", None, True), ("12:02:00", "enqueued", None, True),
                          ("12:02:30", "manual", OVERLAP_FULL, False), ("12:03:00", "coalesced", OVERLAP_FULL, False),
                          ("12:04:00", "enqueued", None, True)]
    assert (len(s.started), s.peak) == (3, 1)
    held = store.read("list_occurrences", schedule_key=KEY)[1]
    job = Queue(store, clock=sim_clock, source=current_source("api")).get(held["job_id"])
    assert job is not None and job.state == "completed" and job.started_at == at(3, 30)  # released, then run


def test_a_held_run_waits_while_its_predecessor_retries_and_starts_when_it_finishes(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    app.task(name="digest")(lambda ctx: None)
    app.schedule(KEY, "every 1m", tz="UTC", task="digest", overlap="buffer_one")
    clock = ClockProcess(app, store, clock=sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    sim_clock.set(at(0, 30))
    clock.start()
    sim_clock.set(at(1))
    clock.tick()
    [first] = queue.claim(1, queues=["default"])
    assert queue.fail(first, 1, "boom", delay=300) == "retryable"  # unfinished: still the previous run
    sim_clock.set(at(2))
    [held] = [f for f in clock.tick() if f.job_id]
    job = queue.get(held.job_id or 0)
    assert job is not None and (job.state, job.run_at) == ("scheduled", HELD_UNTIL)
    assert release_buffered(store, KEY, now=sim_clock.now()) is None and queue.claim(1, queues=["default"]) == []
    queue.cancel(first.id)  # the previous run ends (cancelled counts as finished)
    sim_clock.set(at(2, 10))
    clock.tick()
    [claimed] = queue.claim(1, queues=["default"])
    assert claimed.id == held.job_id


def test_backfill_and_rerun_take_part_in_the_same_accounting(store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    app.task(name="digest")(lambda ctx: None)
    app.schedule(KEY, "every 1m", tz="UTC", task="digest", overlap="skip", catchup="none")
    clock = ClockProcess(app, store, clock=sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("worker"))
    sim_clock.set(at(0, 30))
    clock.start()
    sim_clock.set(at(1))
    clock.tick()
    [running] = queue.claim(1, queues=["default"])
    sim_clock.set(at(5, 30))
    fires = clock.backfill(KEY, at(2), at(3))
    assert [(f.outcome, f.reason, f.job_id) for f in fires] == [("coalesced", OVERLAP_RUNNING, None)] * 2
    with pytest.raises(OncebeatError, match=r"overlap skip and overlap: previous run still running \(job \d+ running"):
        rerun_occurrence(store, fires[0].occurrence_id or 0, clock=sim_clock)
    assert len(store.read("list_occurrences", schedule_key=KEY)) == 3  # 12:01 and the two backfilled: no re-run row
    queue.complete(1, [running.id])
    rerun = rerun_occurrence(store, fires[0].occurrence_id or 0, clock=sim_clock)
    assert rerun.job_id is not None


def test_the_policy_is_set_at_run_time_shown_and_validated(store: Store, sim_clock: SimulatedClock) -> None:
    from oncebeat.schedules_report import describe_schedules

    app = App()
    app.task(name="digest")(lambda ctx: None)
    app.schedule(KEY, "every 1m", tz="UTC", task="digest")
    ClockProcess(app, store, clock=sim_clock).start()
    edit = set_schedule(store, KEY, overlap="skip", clock=sim_clock)
    assert (edit["changed"], edit["old"]["overlap"], edit["new"]["overlap"]) == (True, "allow", "skip")
    [row] = describe_schedules(app, store, now=sim_clock.now())
    assert (row["overlap"], row["origin"]) == ("skip", "runtime")
    with pytest.raises(ConfigError, match="overlap must be one of allow, skip, buffer_one, not 'sometimes'"):
        set_schedule(store, KEY, overlap="sometimes", clock=sim_clock)
    with pytest.raises(ConfigError, match="overlap must be one of"):
        app.schedule("other", "every 1m", tz="UTC", task="digest", overlap="never")


def test_definitions_without_an_overlap_policy_keep_their_digest() -> None:
    """A schedule defined before the overlap policy existed must not look changed after the upgrade."""
    app = App()
    allow = app.schedule(KEY, "every 1m", tz="UTC", task="digest")
    before = {"key": KEY, "expression": "every 1m", "tz": "UTC", "task": "digest", "args": {}, "queue": "default",
              "catchup": "latest", "catchup_window": 86400.0, "dst_gap": "shift", "dst_fold": "first"}
    assert allow.definition_hash() == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:24]
    skip = app.schedule(KEY, "every 1m", tz="UTC", task="digest", overlap="skip")
    assert skip.definition_hash() != allow.definition_hash()


@pytest.mark.parametrize(("overlap", "expected_jobs"), [("skip", 1), ("buffer_one", 2)])
def test_many_operators_triggering_at_once_start_one_run_under_skip_and_hold_one_under_buffer_one(
        db_url: str, store: Store, overlap: str, expected_jobs: int) -> None:
    """Concurrent transactions (separate connections, real time): the database admits one unfinished run
    (plus one held under buffer_one), whoever enqueues."""
    app = App()
    app.task(name="digest")(lambda ctx: None)
    app.schedule(KEY, "0 0 1 1 *", tz="UTC", task="digest", overlap=overlap)
    ClockProcess(app, store, clock=SystemClock()).sync()
    stores = [open_store(db_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    outcomes: list[Any] = []
    errors: list[BaseException] = []

    def trigger(s: Store) -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(ClockProcess(app, s, clock=SystemClock()).trigger(KEY))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=trigger, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        for s in stores:
            s.close()
    assert errors == []
    assert sum(1 for f in outcomes if f.job_id is not None) == expected_jobs
    assert sorted(f.reason for f in outcomes if f.job_id is None) == \
        [OVERLAP_RUNNING if overlap == "skip" else OVERLAP_FULL] * (len(stores) - expected_jobs)


def test_an_operators_retry_of_a_held_run_is_refused_while_the_previous_one_runs(
        store: Store, sim_clock: SimulatedClock) -> None:
    app = App()
    app.task(name="digest")(lambda ctx: None)
    app.schedule(KEY, "every 1m", tz="UTC", task="digest", overlap="buffer_one")
    clock = ClockProcess(app, store, clock=sim_clock)
    queue = Queue(store, clock=sim_clock, source=current_source("cli"))
    sim_clock.set(at(0, 30))
    clock.start()
    sim_clock.set(at(1))
    clock.tick()
    [running] = queue.claim(1, queues=["default"])
    sim_clock.set(at(2))
    [held] = [f.job_id for f in clock.tick() if f.job_id]
    assert held is not None
    with pytest.raises(OncebeatError, match="another unfinished job holds its unique key"):
        queue.retry(held)  # "Retry now" on the held run would start it beside the running one
    assert queue.claim(1, queues=["default"]) == []
    queue.complete(1, [running.id])
    assert queue.retry(held) is True  # once the previous run finished, a retry starts it at once
    [claimed] = queue.claim(1, queues=["default"])
    assert (claimed.id, claimed.unique_key) == (held, f"overlap:{KEY}")


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_the_doctor_reports_no_lost_run_for_occurrences_the_policy_turned_away(
        store: Store, sim_clock: SimulatedClock, overlap: str) -> None:
    from oncebeat.doctor import run_doctor

    s = Scenario(store, sim_clock, overlap)
    s.run()
    report = run_doctor(store, now=sim_clock.now(), since=at(0))
    assert [f.summary for f in report.findings if f.code == "lost"] == []


@pytest.mark.parametrize("policy", ["skip", "buffer_one"])
def test_runs_started_under_allow_count_once_the_schedule_is_switched_at_run_time(
        store: Store, sim_clock: SimulatedClock, policy: str) -> None:
    """Issue 22 item 1: an `allow` schedule with two runs queued, switched to skip (or buffer_one) at run time,
    enqueued the next fire beside them: runs started under `allow` hold no overlap key."""
    app = App()
    app.task(name="digest")(lambda ctx: None)
    app.schedule(KEY, "every 1m", tz="UTC", task="digest")  # allow, the default
    sim_clock.set(at(0, 30))
    clock = ClockProcess(app, store, clock=sim_clock, resync_interval=0)
    clock.start()
    for minute in (1, 2):
        sim_clock.set(at(minute))
        clock.tick()
    queue = Queue(store, clock=sim_clock, source=current_source("api"))
    assert queue.counts().get("available") == 2  # no worker yet: two runs of `allow` wait

    set_schedule(store, KEY, overlap=policy, clock=sim_clock)
    sim_clock.set(at(3))
    [fire] = clock.tick()
    rows = {r["fire_at"]: r for r in store.read("list_occurrences", schedule_key=KEY)}
    if policy == "skip":
        assert (fire.outcome, fire.reason) == ("coalesced", OVERLAP_RUNNING)
        assert rows[at(3)]["job_id"] is None
    else:
        assert fire.outcome == "enqueued" and fire.job_id is not None
        held = queue.get(fire.job_id)
        assert held is not None and held.state == "scheduled" and held.run_at == HELD_UNTIL
        assert release_buffered(store, KEY, now=sim_clock.now()) is None  # the allow runs are unfinished
    sim_clock.set(at(4))
    [fire] = clock.tick()
    assert fire.outcome == "coalesced"  # skip: still running; buffer_one: one already waits
    assert queue.counts().get("available") == 2

    worker = Worker(app, store, clock=sim_clock)
    assert worker.drain() == 2  # the two allow runs finish
    if policy == "buffer_one":
        sim_clock.set(at(4, 10))
        clock.tick()  # releases the held run now
        assert worker.drain() == 1
    sim_clock.set(at(5))
    [fire] = clock.tick()
    assert fire.outcome == "enqueued" and fire.job_id is not None  # nothing unfinished: it runs


def test_the_jobs_a_run_fans_out_do_not_hold_a_skip_schedules_next_fire(store: Store,
                                                                         sim_clock: SimulatedClock) -> None:
    """The reminder scan's send jobs carry its occurrence id: they are not runs of the schedule (jobs.run_of)."""
    app = App()

    @app.task(name="scan")
    def scan(ctx: Any) -> None:
        Queue(store, clock=sim_clock, source=current_source("worker")).enqueue(
            "send", {}, occurrence_id=ctx.job.occurrence_id)

    app.task(name="send")(lambda ctx: None)
    app.schedule(KEY, "every 1m", tz="UTC", task="scan", overlap="skip")
    sim_clock.set(at(0, 30))
    clock = ClockProcess(app, store, clock=sim_clock)
    clock.start()
    sim_clock.set(at(1))
    clock.tick()
    worker = Worker(app, store, clock=sim_clock, queues=("default",))
    worker.run_batch()  # the scan runs and fans out one send job, left unfinished
    queue = Queue(store, clock=sim_clock, source=current_source("api"))
    assert queue.counts().get("available") == 1
    sim_clock.set(at(2))
    [fire] = clock.tick()
    assert fire.outcome == "enqueued", fire  # the send job is not a run of the schedule
