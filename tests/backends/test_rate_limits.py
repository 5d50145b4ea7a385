"""Per-key rate limits (issue 26 item 3), on both backends: the sliding log's arithmetic at the window's edge,
permits counted while in flight, a lowered limit, and a task-level limit that snoozes (never fails) its jobs.

The real-process proof (three workers, a real relay, timestamps of what it received) is in
``tests/acceptance/test_rate_limit_processes.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.errors import RateLimited, Snooze
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.ratelimit import RateLimit, RateLimiter
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

T0 = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_window_slides_a_burst_at_a_minute_boundary_is_not_let_through_twice(store: Store) -> None:
    clock = SimulatedClock(at(59.0))
    limiter = RateLimiter(store, clock=clock)
    relay = RateLimit(key="smtp:relay:25", limit=3, per_seconds=60)
    for _ in range(3):  # three sends from 59.0 s, one after the other, each taking 0.25 s
        with limiter.permit(relay):
            clock.set(clock.now() + timedelta(seconds=0.25))
    assert clock.now() == at(59.75)
    clock.set(at(61.0))  # a new minute; a fixed window of 1 minute would let three more through here
    with pytest.raises(RateLimited) as refused:
        limiter.take(relay)
    assert isinstance(refused.value, Snooze)
    # The first permit ended at 59.25 s: it stops counting 60 s later; jitter adds at most 15 s (per/4).
    first_end = at(59.25)
    expected = (first_end + timedelta(seconds=60) - at(61.0)).total_seconds()
    assert expected <= refused.value.delay <= expected + 15.0
    assert "rate limit 'smtp:relay:25' (3 per 60 s) reached" in refused.value.reason
    clock.set(first_end + timedelta(seconds=59, microseconds=999_999))  # a window [a, a + 60 s) would hold 4
    with pytest.raises(RateLimited):
        limiter.take(relay)
    clock.set(first_end + timedelta(seconds=60))  # 60 s after it: no window of 60 s holds both
    limiter.release(limiter.take(relay))  # one place freed, one taken
    with pytest.raises(RateLimited):
        limiter.take(relay)


def test_no_sixty_second_window_holds_more_than_the_limit_whatever_the_pattern(store: Store) -> None:
    clock = SimulatedClock(at(0))
    limiter = RateLimiter(store, clock=clock)
    relay = RateLimit(key="relay", limit=5, per_seconds=10)
    done: list[tuple[datetime, datetime]] = []
    step = 0
    while clock.now() < at(120):
        step += 1
        try:
            with limiter.permit(relay):
                start = clock.now()
                clock.set(start + timedelta(seconds=0.3 * (step % 4)))  # actions of 0 to 0.9 s
                done.append((start, clock.now()))
        except RateLimited:
            pass
        clock.set(clock.now() + timedelta(seconds=0.37))
    assert len(done) >= 5 * 11
    # The action may happen at any instant of [start, end]: even counted at its worst instant, at most 5 in 10 s.
    for start, _ in done:
        window = [s for s, e in done if e >= start - timedelta(seconds=10) and s <= start]
        assert len(window) <= 5


def test_a_permit_in_flight_counts_until_released_or_its_hold_ends(store: Store) -> None:
    clock = SimulatedClock(at(0))
    limiter = RateLimiter(store, clock=clock, hold=120)
    one = RateLimit(key="tenant:7", limit=1, per_seconds=10)
    held = limiter.take(one, job_id=None)  # its holder dies: never released
    clock.set(at(100))
    with pytest.raises(RateLimited) as refused:
        limiter.take(one)
    assert 30 <= refused.value.delay <= 32.5  # taken at 0 + hold 120 + period 10 = 130
    clock.set(at(130.001))
    second = limiter.take(one)
    assert [p["id"] for p in limiter.permits("tenant:7")] == [second]  # the dead one was pruned
    assert held != second


def test_a_lowered_limit_waits_for_enough_permits_to_leave(store: Store) -> None:
    clock = SimulatedClock(at(0))
    limiter = RateLimiter(store, clock=clock)
    for n in range(4):
        clock.set(at(n))
        limiter.release(limiter.take(RateLimit(key="k", limit=4, per_seconds=60)))
    clock.set(at(10))
    with pytest.raises(RateLimited) as refused:  # 4 count, 2 allowed: the third permit (ended at 2 s) must leave
        limiter.take(RateLimit(key="k", limit=2, per_seconds=60))
    assert 52 <= refused.value.delay <= 67


def test_keys_are_independent_and_bad_limits_are_refused(store: Store) -> None:
    clock = SimulatedClock(at(0))
    limiter = RateLimiter(store, clock=clock)
    limiter.take(RateLimit(key="a", limit=1, per_seconds=60))
    limiter.take(RateLimit(key="b", limit=1, per_seconds=60))
    with pytest.raises(RateLimited):
        limiter.take(RateLimit(key="a", limit=1, per_seconds=60))
    for bad in ({"key": "", "limit": 1, "per_seconds": 1}, {"key": "x", "limit": 0, "per_seconds": 1},
                {"key": "x", "limit": 1.5, "per_seconds": 1}, {"key": "x", "limit": 1, "per_seconds": 0}):
        with pytest.raises(ValueError, match="rate limit"):
            RateLimit(**bad)  # type: ignore[arg-type]


def test_a_task_level_limit_snoozes_the_jobs_over_it_and_runs_all_of_them_without_using_attempts(
        store: Store) -> None:
    clock = SimulatedClock(at(0))
    ran: list[tuple[int, datetime]] = []
    app = App()

    @app.task(max_attempts=3, rate_limit=RateLimit(key="partner-api", limit=2, per_seconds=60))
    def call_partner(ctx: Any, n: int) -> None:
        ran.append((n, ctx.clock.now()))

    queue = Queue(store, clock=clock, source=current_source("api"), app=app)
    for n in range(5):
        queue.enqueue("call_partner", {"n": n})
    worker = Worker(app, store, clock=clock, source=current_source("worker"))
    for _ in range(40):
        worker.drain()
        clock.advance(5)
    assert sorted(n for n, _ in ran) == [0, 1, 2, 3, 4]
    times = sorted(t for _, t in ran)
    for t in times:
        assert sum(1 for u in times if t <= u < t + timedelta(seconds=60)) <= 2
    jobs = store.read("list_jobs", state=None, task="call_partner", limit=10)
    assert {j["state"] for j in jobs} == {"completed"}
    for job in jobs:
        assert job["max_attempts"] - job["attempt"] == 2  # every snooze gave its attempt back
        assert {e["kind"] for e in job["errors"]} <= {"snooze"}
    assert any(job["errors"] for job in jobs)


def test_threads_racing_for_permits_never_exceed_the_limit_in_any_window(store: Store) -> None:
    import threading
    import time

    from oncebeat.timebase import SystemClock

    limiter = RateLimiter(store, clock=SystemClock())
    limit = RateLimit(key="race", limit=10, per_seconds=1.0)
    acted: list[float] = []
    lock = threading.Lock()
    end = time.time() + 3.0

    def race() -> None:
        while time.time() < end:
            try:
                with limiter.permit(limit):
                    with lock:
                        acted.append(time.time())  # the action's instant, inside the permit
            except RateLimited:
                time.sleep(0.005)

    threads = [threading.Thread(target=race) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    acted.sort()
    busiest = max(sum(1 for u in acted if t <= u < t + 1.0) for t in acted)
    assert busiest <= 10
    assert len(acted) >= 20  # the permits freed and were taken again
