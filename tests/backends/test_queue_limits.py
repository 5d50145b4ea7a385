"""A queue's concurrency limit holds across workers (issue 26 item 5), on both backends.

Three real workers (each its own store and connections, four slots each) drain a limited queue: the jobs' own
start and end instants never show more than the limit running at once, every job runs once, and the limit is
reached (it bounds, it does not serialise). A limit set while a worker holds an older read of the limits holds at
once; lowering a limit stops nothing running; lifting it frees the queue; bad limits are refused by name.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from oncebeat.app import App
from oncebeat.audit import events_of
from oncebeat.errors import OncebeatError
from oncebeat.provenance import current_source
from oncebeat.queue import LIMITS_TTL, Queue
from oncebeat.queue_limits import clear_queue_limit, queue_limits, set_queue_limit
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock, SystemClock
from oncebeat.worker import Worker

API = current_source("api")


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # an end sorts before a start at a tie
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def test_three_workers_never_run_more_than_the_limit_at_once(store: Store, db_url: str) -> None:
    spans: list[tuple[float, float]] = []
    ran: list[int] = []
    lock = threading.Lock()
    app = App()

    @app.task(name="call_partner", queue="partner")
    def call_partner(ctx: Any) -> None:
        start = time.monotonic()
        time.sleep(0.05)
        with lock:
            spans.append((start, time.monotonic()))
            ran.append(ctx.job.id)

    q = Queue(store, clock=SystemClock(), source=API, app=app)
    ids = [q.enqueue("call_partner") for _ in range(40)]
    set_queue_limit(store, "partner", 3, source=API, clock=SystemClock())
    stores = [open_store(db_url) for _ in range(3)]
    workers = [Worker(app, s, clock=SystemClock(), queues=("partner",), concurrency=4, batch_size=4,
                      poll_interval=0.01, source=current_source("worker")) for s in stores]
    threads = [threading.Thread(target=w.run, kwargs={"install_signals": False, "stop_after": 60.0}) for w in workers]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if len(ran) == len(ids):
                    break
            time.sleep(0.05)
    finally:
        for w in workers:
            w.request_stop()
        for t in threads:
            t.join(30)
        for s in stores:
            s.close()
    assert sorted(ran) == sorted(ids)  # each job once, none lost
    peak = _max_overlap(spans)
    assert peak <= 3, f"{peak} jobs of the limited queue ran at once"
    assert peak >= 2, "the limit serialised the queue instead of bounding it"


def test_a_queue_rereads_the_limits_by_its_own_clock_so_simulated_runs_repeat(
        store: Store, sim_clock: SimulatedClock) -> None:
    """LIMITS_TTL runs on the queue's (injected) clock, not the host's: on simulated time the re-reads, and with them
    the statements a simulation runs (each may draw a fault), do not depend on how fast the host ran it."""
    q = Queue(store, clock=sim_clock, source=API)
    for _ in range(3):
        q.enqueue("t", queue="mail")
    assert len(q.claim(1, queues=["mail"], limit=1)) == 1  # read: no limit
    set_queue_limit(store, "mail", 2, source=API, clock=sim_clock)
    assert q.claim(1, queues=["mail"], limit=5) == []  # simulated time has not moved: the read is kept (stale)
    sim_clock.advance(LIMITS_TTL)  # however little host time has passed, the read is due again
    assert len(q.claim(1, queues=["mail"], limit=5)) == 1  # read: limit 2, one running
    assert q.claim(1, queues=["mail"], limit=5) == []  # two running, limit 2
    clear_queue_limit(store, "mail", source=API, clock=sim_clock)
    assert len(q.claim(1, queues=["mail"], limit=5)) == 1  # lifted: the last job


def test_a_new_limit_holds_before_a_worker_rereads_the_limits(store: Store, sim_clock: SimulatedClock) -> None:
    q_old = Queue(store, clock=sim_clock, source=API)
    for _ in range(5):
        q_old.enqueue("t", queue="mail")
    assert q_old.claim(1, queues=["other"]) == []  # this Queue has now read the limits: none
    set_queue_limit(store, "mail", 2, source=API, clock=sim_clock)
    assert q_old.claim(1, queues=["mail"], limit=5) == []  # its read is stale: the claim statement refuses
    q_new = Queue(store, clock=sim_clock, source=API)
    first = q_new.claim(2, queues=["mail"], limit=5)
    assert len(first) == 2
    assert q_new.claim(3, queues=["mail"], limit=5) == []  # both slots taken
    set_queue_limit(store, "mail", 1, source=API, clock=sim_clock)  # lowered: nothing running is stopped
    q_new.complete(2, [first[0].id])
    assert q_new.claim(3, queues=["mail"], limit=5) == []  # 1 running, limit 1
    q_new.complete(2, [first[1].id])
    assert len(q_new.claim(3, queues=["mail"], limit=5)) == 1
    assert clear_queue_limit(store, "mail", source=API, clock=sim_clock) == 1
    assert len(Queue(store, clock=sim_clock, source=API).claim(4, queues=["mail"], limit=5)) == 2  # the rest
    kinds = [(e["kind"], e["detail"].get("max_running"), e["detail"].get("before"))
             for e in reversed(events_of(store, "queue:mail"))]
    assert kinds == [("queue.limited", 2, None), ("queue.limited", 1, 2), ("queue.unlimited", None, 1)]


def test_a_queue_listed_after_a_limited_one_gets_the_rest_of_the_batch(store: Store,
                                                                       sim_clock: SimulatedClock) -> None:
    q = Queue(store, clock=sim_clock, source=API)
    for name in ("mail", "mail", "mail", "bulk", "bulk"):
        q.enqueue("t", queue=name)
    set_queue_limit(store, "mail", 1, source=API, clock=sim_clock)
    jobs = Queue(store, clock=sim_clock, source=API).claim(1, queues=["mail", "bulk"], limit=3)
    assert sorted(j.queue for j in jobs) == ["bulk", "bulk", "mail"]


@pytest.mark.parametrize("bad", [0, -1, 100_001, 2.5, True, "3"])
def test_a_bad_limit_is_refused_and_changes_nothing(store: Store, sim_clock: SimulatedClock, bad: Any) -> None:
    with pytest.raises(OncebeatError, match="whole number of jobs from 1 to 100000"):
        set_queue_limit(store, "mail", bad, source=API, clock=sim_clock)
    assert queue_limits(store) == {}


def test_the_cli_sets_shows_and_lifts_a_limit(store: Store, db_url: str) -> None:
    from click.testing import CliRunner

    from oncebeat.cli import cli as oncebeat_cli

    def cli(*args: str) -> Any:
        return CliRunner().invoke(oncebeat_cli, list(args))

    set_ = cli("queues", "limit", "default", "4", "--db", db_url)
    assert set_.exit_code == 0 and "at most 4 job(s) running at once over every worker (was no limit)" in set_.output
    listing = cli("queues", "--db", db_url)
    assert "default: active; 0 waiting, 0 running (at most 4 at once), 0 held" in listing.output
    bad = cli("queues", "limit", "default", "lots", "--db", db_url)
    assert bad.exit_code == 2 and "'lots' is not a limit" in bad.output and "Traceback" not in bad.output
    typo = cli("queues", "limit", "defualt", "2", "--db", db_url)
    assert typo.exit_code == 0 and "warning: no task, job or pause names queue 'defualt'" in typo.output
    lifted = cli("queues", "limit", "default", "none", "--db", db_url)
    assert lifted.exit_code == 0 and "no limit (it was 4 at once)" in lifted.output
