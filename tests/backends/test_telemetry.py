"""The telemetry seam: the engine tells subscribers what happens; crash points are one subscriber."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from oncebeat import telemetry
from oncebeat.app import App
from oncebeat.crashpoints import POINT_OF_EVENT, SimulatedCrash, crashpoints
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker


@pytest.fixture
def seen() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    got: list[tuple[str, dict[str, Any]]] = []

    def record(event: str, data: Mapping[str, Any]) -> None:
        got.append((event, dict(data)))

    for event in telemetry.EVENTS:
        telemetry.attach(event, record)
    yield got
    for event in telemetry.EVENTS:
        telemetry.detach(event, record)


def _app() -> App:
    app = App()

    @app.task()
    def send(ctx: Any, n: int) -> None:
        ctx.effect(f"send:{n}", lambda: n)

    @app.task(max_attempts=1)
    def broken(ctx: Any) -> None:
        raise ValueError("no such thing")

    return app


def test_a_worker_run_tells_claim_start_effects_finish_and_failure(store: Store, sim_clock: SimulatedClock,
                                                                   seen: list[tuple[str, dict[str, Any]]]) -> None:
    app = _app()
    q = Queue(store, clock=sim_clock, source=current_source("api"), app=app)
    q.enqueue("send", {"n": 1})
    q.enqueue("broken")
    Worker(app, store, clock=sim_clock).drain()
    names = [e for e, _ in seen]
    claimed = next(d for e, d in seen if e == "job.claimed" and d["count"])
    assert claimed["count"] == 2 and claimed["seconds"] >= 0 and claimed["queues"] == ["default"]
    assert names.count("job.started") == 2 and names.count("job.finished") == 2
    assert [d.get("key") or d["keys"] for e, d in seen if e.startswith("effect.")] == \
        ["send:1", "send:1", ["send:1"], "send:1"]  # effect.batch names the keys written together
    assert [e for e in names if e.startswith("effect.")] == ["effect.requested", "effect.performed",
                                                             "effect.batch", "effect.recorded"]
    [failed] = [d for e, d in seen if e == "job.failed"]
    assert (failed["task"], failed["state"]) == ("broken", "discarded")
    assert names.index("job.batch_done") > names.index("job.claimed")


def test_a_rescue_is_told_with_the_jobs_it_put_back(store: Store, sim_clock: SimulatedClock,
                                                    seen: list[tuple[str, dict[str, Any]]]) -> None:
    app = _app()
    q = Queue(store, clock=sim_clock, source=current_source("api"), app=app)
    job_id = q.enqueue("send", {"n": 2})
    crashpoints.arm("after_claim")
    with pytest.raises(SimulatedCrash):
        Worker(app, store, clock=sim_clock, lease_seconds=5).drain()
    sim_clock.advance(10)
    q.rescue()
    [rescued] = [d for e, d in seen if e == "job.rescued"]
    assert rescued["count"] == 1 and rescued["jobs"] == [{"id": job_id, "task": "send", "state": "available"}]


def test_crash_points_hang_on_telemetry_events() -> None:
    assert set(POINT_OF_EVENT) <= set(telemetry.EVENTS)
    crashpoints.arm("effect_before_record")
    telemetry.emit("effect.requested", {"key": "k"})  # another point: nothing happens
    with pytest.raises(SimulatedCrash):
        telemetry.emit("effect.performed", {"key": "k"})


def test_a_span_emits_its_data_and_seconds_only_when_the_block_succeeds(
        seen: list[tuple[str, dict[str, Any]]]) -> None:
    with telemetry.span("job.claimed", {"worker_id": 1}) as data:
        data["count"] = 0
    assert seen[-1][0] == "job.claimed" and seen[-1][1]["worker_id"] == 1 and seen[-1][1]["seconds"] >= 0
    with pytest.raises(RuntimeError), telemetry.span("job.claimed", {"worker_id": 2}):
        raise RuntimeError("claim failed")
    assert [d["worker_id"] for e, d in seen] == [1]


def test_an_unknown_event_name_is_refused_and_a_broken_subscriber_never_fails_the_engine(
        seen: list[tuple[str, dict[str, Any]]]) -> None:
    with pytest.raises(ValueError, match="unknown telemetry event 'job.exploded'"):
        telemetry.attach("job.exploded", lambda e, d: None)

    def broken(event: str, data: Mapping[str, Any]) -> None:
        raise KeyError("oops")

    telemetry.attach("job.rescued", broken)
    try:
        telemetry.emit("job.rescued", {"count": 0, "jobs": []})
    finally:
        telemetry.detach("job.rescued", broken)
    assert seen == [("job.rescued", {"count": 0, "jobs": []})]
