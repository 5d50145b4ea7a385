"""Writers queueing on one SQLite file: the store reports a wait, and the worker then claims a larger batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import flock_held_elsewhere
from oncebeat import App
from oncebeat.store import open_store
from oncebeat.store.base import Store
from oncebeat.store.writelock import WriteLock
from oncebeat.worker import Worker


@contextmanager
def _held_elsewhere(url: str, seconds: float) -> Iterator[threading.Event]:
    """Another store on the same file holds a write transaction for ``seconds`` (in a thread); yields once it holds."""
    other = open_store(url)
    holding = threading.Event()

    def hold() -> None:
        with other.transaction():
            holding.set()
            time.sleep(seconds)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert holding.wait(10)
        yield holding
    finally:
        t.join(timeout=30)
        other.close()


def test_the_lock_says_whether_its_last_acquire_waited_for_another_holder(tmp_path: Path) -> None:
    path = str(tmp_path / "db-lock")
    holder, waiter = WriteLock(path), WriteLock(path)
    try:
        assert waiter.acquire(1.0) and not waiter.waited
        waiter.release()
        assert holder.acquire(1.0)
        threading.Timer(0.2, holder.release).start()
        assert waiter.acquire(10.0) and waiter.waited
        waiter.release()
        assert waiter.acquire(1.0) and not waiter.waited
        waiter.release()
    finally:
        holder.close()
        waiter.close()


def test_a_sqlite_transaction_that_waited_for_another_process_writer_is_reported_to_its_thread(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    store = open_store(url)
    try:
        store.migrate()
        assert not store.write_waited()
        with _held_elsewhere(url, 0.3):
            started = time.monotonic()
            with store.transaction() as tx:
                tx.execute("SELECT 1")
            assert time.monotonic() - started >= 0.2  # it queued behind the other store's transaction
        assert store.write_waited()
        seen: list[bool] = []
        t = threading.Thread(target=lambda: seen.append(store.write_waited()))
        t.start()
        t.join()
        assert seen == [False]  # per thread: another thread's wait is not this one's
        with store.transaction():  # nobody else writes now
            pass
        assert not store.write_waited()
    finally:
        store.close()


def test_postgres_never_reports_a_write_wait(pg_db_url: str) -> None:
    store = open_store(pg_db_url)
    try:
        store.migrate()
        with store.transaction():
            pass
        assert not store.write_waited()
    finally:
        store.close()


def _worker(store: Store) -> Worker:
    app = App()

    @app.task()
    def noop(ctx: Any) -> None:
        pass

    return Worker(app, store, batch_size=5)


def test_the_worker_claims_more_batches_while_its_writes_keep_queueing_behind_another_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    store = open_store(url)
    try:
        store.migrate()
        worker = _worker(store)
        worker.queue.enqueue_many([{"task": "noop"} for _ in range(80)])
        wid = worker.register()
        assert worker._claim_size() == 5
        with _held_elsewhere(url, 0.3):
            first = worker.queue.claim(wid, limit=worker._claim_size())
        assert len(first) == 5
        size = worker._claim_size()
        assert size == 10  # the claim waited: the next takes two batches' worth
        with _held_elsewhere(url, 0.3):
            second = worker.queue.claim(wid, limit=size, complete=[j.id for j in first])
        assert len(second) == 10
        size = worker._claim_size()
        assert size == 20  # a second claim in a row waited: four batches' worth
        with _held_elsewhere(url, 0.3):
            third = worker.queue.claim(wid, limit=size, complete=[j.id for j in second])
        assert len(third) == 20
        size = worker._claim_size()
        assert size == 20  # never more than four batches
        fourth = worker.queue.claim(wid, limit=size, complete=[j.id for j in third])
        assert len(fourth) == 20
        assert worker._claim_size() == 5  # that claim found the lock free: back to one batch
        assert len({j.id for j in first + second + third + fourth}) == 55
    finally:
        store.close()


def test_the_wal_is_checkpointed_after_the_writer_lock_is_released_and_stays_bounded(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = open_store(f"sqlite:///{db}")
    try:
        with store.transaction() as tx:
            tx.execute("CREATE TABLE pad (x BLOB)")
        lock_held: list[bool] = []  # at each checkpoint the store runs: was the writer lock held?

        def trace(sql: str) -> None:
            if "wal_checkpoint" in sql:
                lock_held.append(flock_held_elsewhere(Path(f"{db}-lock")))

        store._connect().set_trace_callback(trace)
        for _ in range(400):  # ~6 pages per transaction: 2,400 frames, past SQLite's own checkpoint size
            with store.transaction() as tx:
                tx.execute("INSERT INTO pad VALUES (zeroblob(20000))")
        assert lock_held and not any(lock_held)
        assert db.with_name("c.db-wal").stat().st_size < 2000 * 4096  # SQLite's safety net never had to run
        with store.transaction() as tx:
            assert tx.execute("SELECT COUNT(*) AS n FROM pad") == [{"n": 400}]
    finally:
        store.close()
