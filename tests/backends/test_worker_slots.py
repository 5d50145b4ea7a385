"""Free slots keep working (issue 22 item 4): a slot that is free claims new work while others still run.

`oncebeat worker --concurrency 4` ran a 40 s job, and a 0.1 s job enqueued 3 s later finished 37 s after its
enqueue: the next batch was claimed only when the whole previous batch had ended.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from oncebeat.app import App
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store
from oncebeat.timebase import SystemClock
from oncebeat.worker import Worker


def test_a_short_job_runs_beside_a_long_one_instead_of_after_it(store: Store) -> None:
    long_may_end = threading.Event()
    finished: dict[str, float] = {}
    app = App()

    @app.task()
    def long(ctx: Any) -> None:
        long_may_end.wait(30)
        finished["long"] = time.monotonic()

    @app.task()
    def short(ctx: Any) -> None:
        time.sleep(0.1)
        finished["short"] = time.monotonic()

    queue = Queue(store, clock=SystemClock(), source=current_source("api"))
    queue.enqueue("long", {})
    worker = Worker(app, store, concurrency=4, poll_interval=0.2)
    runner = threading.Thread(target=worker.run, kwargs={"install_signals": False, "stop_after": 40}, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while queue.counts().get("running", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the long job runs; the worker has found the queue empty since
        enqueued = time.monotonic()
        short_id = queue.enqueue("short", {})
        assert short_id is not None
        deadline = time.monotonic() + 15
        while "short" not in finished and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "short" in finished, "the short job waited for the long one"
        assert "long" not in finished
        waited = finished["short"] - enqueued
        assert waited < 5, f"the short job finished {waited:.1f} s after its enqueue"
        deadline = time.monotonic() + 10  # its completion is committed while the long job still runs
        while (job := queue.get(short_id)) is not None and job.state != "completed" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job is not None and job.state == "completed"
    finally:
        long_may_end.set()
        worker.request_stop()
        runner.join(30)
    assert queue.counts().get("completed", 0) == 2
