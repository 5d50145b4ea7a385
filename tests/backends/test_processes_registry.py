"""The process registry: one module registers, heartbeats, stops and lists clocks and workers."""

from __future__ import annotations

from datetime import timedelta

from oncebeat import processes
from oncebeat.app import App
from oncebeat.clock import ClockProcess
from oncebeat.provenance import current_source
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker


def test_a_registered_process_heartbeats_and_stops_with_audit_events(store: Store, sim_clock: SimulatedClock) -> None:
    source = current_source("worker")
    pid = processes.register(store, role="worker", source=source, clock=sim_clock, info={"queues": ["default"]})
    sim_clock.advance(10)
    processes.heartbeat(store, pid, sim_clock.now())
    [row] = processes.list_processes(store, running=True)
    assert (row["id"], row["role"], row["info"]) == (pid, "worker", {"queues": ["default"]})
    assert row["heartbeat_at"] == sim_clock.now()
    processes.stop(store, pid, source=source, now=sim_clock.now(), detail={"processed": 3})
    assert processes.list_processes(store, running=True) == []
    [stopped] = processes.list_processes(store)
    assert stopped["stopped_at"] == sim_clock.now()
    kinds = [e["kind"] for e in store.read("list_events", subject=f"process:{pid}", kind=None, since=sim_clock.now()
                                           - timedelta(days=1))]
    assert kinds == ["process.started", "process.stopped"]


def test_clock_and_worker_appear_in_the_registry_through_it(store: Store, sim_clock: SimulatedClock) -> None:
    store.migrate()
    app = App()
    clock = ClockProcess(app, store, clock=sim_clock)
    clock.start()
    worker = Worker(app, store, clock=sim_clock)
    worker.drain()
    roles = sorted(r["role"] for r in processes.list_processes(store, running=True))
    assert roles == ["clock", "worker"]
    worker.stop_process()
    assert [r["role"] for r in processes.list_processes(store, running=True)] == ["clock"]
