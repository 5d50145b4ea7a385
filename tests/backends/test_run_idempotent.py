"""Store.run_idempotent: one idempotent statement as its own transaction, run again safely (both backends).

The effect ledger's point of no return is such a statement (``effect_no_return``): it commits on its own, a repeat
by the same holder changes nothing and returns the same row, and once the key is no longer that holder's started
one it returns nothing. On PostgreSQL it is one round trip in autocommit and survives a terminated pooled
connection (tried on the next one).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from oncebeat.effects import EffectAttempt, EffectLedger, Holder
from oncebeat.errors import EffectBusy
from oncebeat.provenance import current_source
from oncebeat.store import Store
from oncebeat.timebase import SimulatedClock

HOLDER = Holder(job_id=None, attempt=None, process_id=None)


def _no_return(store: Store, key: str, clock: SimulatedClock) -> list[dict[str, Any]]:
    return store.run_idempotent("effect_no_return", key=key, now=clock.now(), job_id=None, attempt=None)


def test_the_mark_commits_alone_and_a_repeat_returns_the_same_row(store: Store, sim_clock: SimulatedClock) -> None:
    ledger = EffectLedger(store, clock=sim_clock, source=current_source("worker"))
    seen: list[Any] = []

    def effect(attempt: EffectAttempt) -> str:
        assert store.read("effect_get", key="k:1")[0]["no_return_at"] is None
        attempt.point_of_no_return()
        seen.append(store.read("effect_get", key="k:1")[0]["no_return_at"])  # committed: another read sees it
        seen.append(_no_return(store, "k:1", sim_clock))  # run again: same holder, still started
        return "ok"

    assert ledger.run("k:1", effect, holder=HOLDER, marks_point_of_no_return=True) == "ok"
    assert seen[0] is not None
    assert seen[1] == [{"key": "k:1"}]
    assert store.read("effect_get", key="k:1")[0]["state"] == "done"
    assert _no_return(store, "k:1", sim_clock) == []  # done: no longer a started key of this holder


def test_a_key_held_by_another_attempt_is_not_marked(store: Store, sim_clock: SimulatedClock) -> None:
    ledger = EffectLedger(store, clock=sim_clock, source=current_source("worker"))

    def effect(attempt: EffectAttempt) -> None:
        with store.transaction() as tx:  # another holder took the key meanwhile
            tx.execute("UPDATE effects SET attempt = 99 WHERE key = 'k:2'")
        attempt.point_of_no_return()

    with pytest.raises(EffectBusy, match="not going past the point of no return"):
        ledger.run("k:2", effect, holder=HOLDER, marks_point_of_no_return=True)
    assert store.read("effect_get", key="k:2")[0]["no_return_at"] is None


def test_postgres_runs_it_again_on_the_next_connection_when_one_was_terminated(
        store: Store, sim_clock: SimulatedClock, db_url: str) -> None:
    if store.backend != "postgres":
        pytest.skip("SQLite runs it in a write transaction (no pooled connection to lose)")
    ledger = EffectLedger(store, clock=sim_clock, source=current_source("worker"))
    marked: list[list[dict[str, Any]]] = []

    def effect(attempt: EffectAttempt) -> None:
        with store.transaction() as tx:  # the pooled connections' server processes, ended from outside
            pids = [int(r["pid"]) for r in tx.execute("SELECT pg_backend_pid() AS pid")]
        with psycopg.connect(db_url.split("?")[0], autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        marked.append(_no_return(store, "k:3", sim_clock))

    ledger.run("k:3", effect, holder=HOLDER, marks_point_of_no_return=True)
    assert marked == [[{"key": "k:3"}]]
    assert store.read("effect_get", key="k:3")[0]["no_return_at"] is not None
