"""A process heartbeat is one idempotent statement (``processes.heartbeat`` through ``Store.run_idempotent``).

Every clock tick and every worker batch beats; on PostgreSQL the beat is one round trip in autocommit instead of
``BEGIN``, ``UPDATE``, ``COMMIT`` (issue 27: a third of a simulation's transactions were heartbeats), and it still
lands when the pooled connections' server processes were terminated (run again on the next one). Both backends
record the instant the same way.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from oncebeat import processes
from oncebeat.provenance import current_source
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock


def _beat_at(store: Store, process_id: int) -> Any:
    rows = [p for p in processes.list_processes(store) if int(p["id"]) == process_id]
    return rows[0]["heartbeat_at"]


def test_a_heartbeat_records_its_instant_and_a_repeat_changes_nothing(store: Store,
                                                                      sim_clock: SimulatedClock) -> None:
    pid = processes.register(store, role="worker", source=current_source("worker"), clock=sim_clock)
    later = sim_clock.now() + timedelta(seconds=10)
    processes.heartbeat(store, pid, later)
    assert _beat_at(store, pid) == later
    processes.heartbeat(store, pid, later)  # run again (as after a lost reply): the same row
    assert _beat_at(store, pid) == later
    assert [p["id"] for p in processes.list_processes(store, running=True)] == [pid]


def test_postgres_sends_a_heartbeat_as_one_statement_without_begin_or_commit(
        store: Store, sim_clock: SimulatedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    if store.backend != "postgres":
        pytest.skip("SQLite has no round trips: one write transaction in this process")
    pid = processes.register(store, role="clock", source=current_source("clock"), clock=sim_clock)
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def spy(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(" ".join(str(query).split()))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    processes.heartbeat(store, pid, sim_clock.now() + timedelta(seconds=5))
    monkeypatch.undo()
    assert len(sent) == 1, sent
    assert "UPDATE processes SET heartbeat_at" in sent[0]
    assert not any(q.upper().startswith(("BEGIN", "COMMIT")) for q in sent)
    assert _beat_at(store, pid) == sim_clock.now() + timedelta(seconds=5)


def test_postgres_heartbeat_lands_after_the_pooled_connections_were_terminated(
        store: Store, sim_clock: SimulatedClock, db_url: str) -> None:
    if store.backend != "postgres":
        pytest.skip("SQLite has no pooled connection to lose")
    pid = processes.register(store, role="worker", source=current_source("worker"), clock=sim_clock)
    with store.transaction() as tx:
        pids = [int(r["pid"]) for r in tx.execute("SELECT pg_backend_pid() AS pid")]
    with psycopg.connect(db_url.split("?")[0], autocommit=True) as admin:
        for backend in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
    processes.heartbeat(store, pid, sim_clock.now() + timedelta(seconds=7))
    assert _beat_at(store, pid) == sim_clock.now() + timedelta(seconds=7)
