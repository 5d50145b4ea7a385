"""The effect ledger claims a new key with one statement that is its own transaction (Store.run_alone; issue 27).

On PostgreSQL that is one round trip instead of ``BEGIN``, claim, ``COMMIT``. Whatever goes wrong with that
statement, the claim transaction of before decides: a connection that died (the store never runs a claim again)
falls back to it and the effect runs once; a claim that committed although its reply was lost is found busy, the
job is retried after a lease and its next attempt takes the key over (it never reached its point of no return):
sent once. Both backends; on PostgreSQL also with the pooled connections' server processes terminated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest

from oncebeat.app import App
from oncebeat.effects import EffectAttempt, EffectLedger, Holder
from oncebeat.errors import TransientStoreError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, Tx
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

LEASE = 30.0


class Sender:
    """Task ``send``: one email per invoice through ``ctx.effect``, marking its point of no return as the
    reminder send does; ``sent`` is the outside world's view."""

    def __init__(self, store: Store, clock: SimulatedClock) -> None:
        self.store, self.clock = store, clock
        self.sent: list[int] = []
        self.app = App()

        @self.app.task(max_attempts=5)
        def send(ctx: Any, invoice_id: int) -> None:
            def deliver(attempt: EffectAttempt) -> str:
                attempt.point_of_no_return()
                self.sent.append(invoice_id)
                return f"<{invoice_id}@oncebeat.test>"

            ctx.effect(f"reminder:{invoice_id}", deliver, payload={"invoice_id": invoice_id},
                       marks_point_of_no_return=True)

    def queue(self) -> Queue:
        return Queue(self.store, clock=self.clock, source=current_source("api"))

    def worker(self) -> Worker:
        return Worker(self.app, self.store, clock=self.clock, lease_seconds=LEASE)

    def state(self, job_id: int) -> str:
        job = self.queue().get(job_id)
        assert job is not None
        return job.state

    def effect(self, key: str) -> dict[str, Any]:
        [row] = self.store.read("effect_get", key=key)
        return row


@pytest.fixture
def sender(store: Store, sim_clock: SimulatedClock) -> Sender:
    return Sender(store, sim_clock)


def _counting_transactions(store: Store, opened: list[int]) -> Callable[..., AbstractContextManager[Tx]]:
    original = store.transaction

    def transaction(**kwargs: Any) -> AbstractContextManager[Tx]:
        opened.append(1)
        return original(**kwargs)

    return transaction


def test_a_new_key_is_claimed_by_its_own_statement_without_a_transaction(store: Store,
                                                                          sim_clock: SimulatedClock) -> None:
    q = Queue(store, clock=sim_clock, source=current_source("api"))
    worker = Worker(App(), store, clock=sim_clock, lease_seconds=LEASE)
    wid = worker.register()
    q.enqueue("charge")
    [job] = q.claim(wid)
    holder = Holder(job_id=job.id, attempt=job.attempt, process_id=wid)
    names: list[str] = []
    opened: list[int] = []
    seen: dict[str, Any] = {}

    def charge() -> str:
        seen["names"], seen["opened"] = list(names), len(opened)
        seen["row"] = store.read("effect_get", key="charge:1")[0]  # committed: another connection sees it
        return "ch_1"

    store.before_statement = names.append
    store.transaction = _counting_transactions(store, opened)  # type: ignore[method-assign]
    try:
        result = EffectLedger(store, clock=sim_clock, source=current_source("worker")).run(
            "charge:1", charge, holder=holder, payload={"eur": 10})
    finally:
        store.before_statement = None
        del store.transaction
    assert result == "ch_1"
    assert seen["names"] == ["effect_claim_current"], "the fenced claim alone, nothing read before it"
    assert seen["opened"] == (0 if store.backend == "postgres" else 1)  # SQLite: run_alone is a write transaction
    assert seen["row"]["state"] == "started" and seen["row"]["job_id"] == job.id
    assert store.read("effect_get", key="charge:1")[0]["state"] == "done"


def test_a_claim_on_a_dead_connection_falls_back_to_the_claim_transaction_and_runs_once(
        sender: Sender, store: Store) -> None:
    job_id = sender.queue().enqueue("send", {"invoice_id": 1})
    assert job_id is not None
    names: list[str] = []

    def dead_once(name: str) -> None:  # as a connection found dead would: nothing reached the server
        names.append(name)
        if name == "effect_claim_current" and names.count(name) == 1:
            raise TransientStoreError(f"query {name}: connection cut (test fault)")

    store.before_statement = dead_once
    try:
        sender.worker().drain()
    finally:
        store.before_statement = None
    assert names.count("effect_claim_current") == 2, "claimed again, in the transaction"
    assert "effect_get" not in names, "the transaction's claim inserted the key"
    assert sender.sent == [1]
    assert sender.state(job_id) == "completed"
    assert sender.effect("reminder:1")["state"] == "done"


def test_a_claim_that_committed_but_lost_its_reply_is_retried_after_a_lease_and_sent_once(
        sender: Sender, store: Store, sim_clock: SimulatedClock) -> None:
    job_id = sender.queue().enqueue("send", {"invoice_id": 2})
    assert job_id is not None
    original = store.run_alone
    lost: list[str] = []

    def reply_lost(name: str, /, **params: Any) -> list[dict[str, Any]]:
        rows = original(name, **params)  # committed
        if not lost:
            lost.append(name)
            raise TransientStoreError(f"query {name}: connection cut after the commit (test fault)")
        return rows

    store.run_alone = reply_lost  # type: ignore[method-assign]
    try:
        sender.worker().drain()
    finally:
        del store.run_alone
    assert lost == ["effect_claim_current"]
    assert sender.sent == [], "found busy (this very attempt's started key): nothing sent"
    row = sender.effect("reminder:2")
    assert row["state"] == "started" and row["no_return_at"] is None
    job = sender.queue().get(job_id)
    assert job is not None and job.state == "retryable" and job.errors[-1]["kind"] == "busy"

    sim_clock.advance(LEASE)
    sender.worker().drain()
    assert sender.sent == [2], "the next attempt took the key over: sent once"
    assert sender.state(job_id) == "completed"
    assert sender.effect("reminder:2")["state"] == "done"


@pytest.fixture
def terminate_pooled(store: Store, db_url: str) -> Iterator[Callable[[], None]]:
    def terminate() -> None:
        with store.transaction() as tx:  # the pooled connection's server process, ended from outside
            pids = [int(r["pid"]) for r in tx.execute("SELECT pg_backend_pid() AS pid")]
        with psycopg.connect(db_url.split("?")[0], autocommit=True) as admin:
            for pid in pids:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    if store.backend != "postgres":
        pytest.skip("SQLite has no pooled connection to lose")
    yield terminate


def test_postgres_run_alone_on_a_terminated_connection_raises_and_the_pool_serves_a_live_one(
        store: Store, sim_clock: SimulatedClock, terminate_pooled: Callable[[], None]) -> None:
    params = dict(payload_hash="h", job_id=None, attempt=None, process_id=None, now=sim_clock.now(),
                  no_return_at=None, frozen=None, **current_source("worker").params())
    terminate_pooled()
    with pytest.raises(TransientStoreError):
        store.run_alone("effect_claim", key="k:dead", **params)
    assert store.read("effect_get", key="k:dead") == [], "the server never ran it"
    assert store.run_alone("effect_claim", key="k:dead", **params) == [{"key": "k:dead"}]


def test_postgres_a_send_whose_pooled_connection_was_terminated_runs_once(
        sender: Sender, store: Store, terminate_pooled: Callable[[], None]) -> None:
    job_id = sender.queue().enqueue("send", {"invoice_id": 3})
    assert job_id is not None
    worker = sender.worker()
    worker.register()
    terminate_pooled()
    worker.drain()
    assert sender.sent == [3]
    assert sender.state(job_id) == "completed"
    assert sender.effect("reminder:3")["state"] == "done"
