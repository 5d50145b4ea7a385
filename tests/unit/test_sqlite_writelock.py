"""The SQLite writer lock (``store/writelock.py``): bounded waits, abandoned waits undone, fork-safe."""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path

import pytest

from conftest import flock_held_elsewhere
from oncebeat.errors import StoreError
from oncebeat.store import open_store
from oncebeat.store.writelock import WriteLock


def test_a_wait_for_a_lock_held_elsewhere_ends_after_its_timeout_and_leaves_nothing_held(tmp_path: Path) -> None:
    path = tmp_path / "db-lock"
    first, second = WriteLock(str(path)), WriteLock(str(path))
    try:
        assert first.acquire(1.0)
        started = time.monotonic()
        assert not second.acquire(0.2)
        assert 0.15 <= time.monotonic() - started < 5
        first.release()
        # the abandoned wait got the lock late and gave it back: a third party and the second both get it now
        deadline = time.monotonic() + 5
        while flock_held_elsewhere(path):
            assert time.monotonic() < deadline, "an abandoned wait kept the lock"
            time.sleep(0.01)
        assert second.acquire(1.0)
        second.release()
    finally:
        first.close()
        second.close()


def test_a_waiter_is_handed_the_lock_when_the_holder_releases_it(tmp_path: Path) -> None:
    path = tmp_path / "db-lock"
    holder, waiter = WriteLock(str(path)), WriteLock(str(path))
    got: list[bool] = []
    try:
        assert holder.acquire(1.0)
        t = threading.Thread(target=lambda: got.append(waiter.acquire(30.0)))
        t.start()
        time.sleep(0.1)
        assert got == []
        holder.release()
        t.join(timeout=10)
        assert got == [True] and flock_held_elsewhere(path)
        waiter.release()
        assert not flock_held_elsewhere(path)
    finally:
        holder.close()
        waiter.close()


def test_threads_of_one_process_take_turns(tmp_path: Path) -> None:
    lock = WriteLock(str(tmp_path / "db-lock"))
    inside = 0
    overlaps = 0

    def work() -> None:
        nonlocal inside, overlaps
        for _ in range(200):
            assert lock.acquire(10.0)
            inside += 1
            overlaps += inside > 1
            inside -= 1
            lock.release()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    lock.close()
    assert overlaps == 0


def test_a_forked_child_neither_holds_nor_frees_the_parents_lock(tmp_path: Path) -> None:
    path = tmp_path / "db-lock"
    lock = WriteLock(str(path))
    assert lock.acquire(1.0)
    with warnings.catch_warnings():  # other tests' threads may be alive: the child only uses the lock
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: its copy of the descriptor is closed, not unlocked; it can wait for the lock
        code = 0 if not lock.acquire(0.2) else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert flock_held_elsewhere(path), "the parent still holds its lock after the child exited"
    lock.release()
    lock.close()
    assert not flock_held_elsewhere(path)


def test_a_nested_transaction_on_the_same_store_fails_at_once_instead_of_waiting_for_itself(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/nested.db?busy_timeout=20")
    try:
        started = time.monotonic()
        with store.transaction():
            with pytest.raises(StoreError, match="within a transaction"), store.transaction():
                pass
        assert time.monotonic() - started < 5  # SQLite's own refusal, not a wait for a lock this thread holds
        with store.transaction() as tx:  # the lock was released: the next transaction gets it
            assert tx.execute("SELECT 1 AS one") == [{"one": 1}]
    finally:
        store.close()


def test_threads_meeting_an_unusable_lock_file_all_fall_back_to_sqlites_own_wait(tmp_path: Path) -> None:
    (tmp_path / "w.db-lock").mkdir()  # the lock file cannot be opened: each first transaction finds that out
    errors: list[BaseException] = []
    with open_store(f"sqlite:///{tmp_path / 'w.db'}") as store:
        store.migrate()
        start = threading.Barrier(8)

        def first_transactions() -> None:
            start.wait()
            try:
                for _ in range(20):
                    with store.transaction() as tx:
                        tx.run("count_jobs_by_state")
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
                errors.append(exc)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            threads = [threading.Thread(target=first_transactions) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert errors == []
