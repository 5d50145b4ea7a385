"""Idempotency keys (engine migration 0010, :mod:`oncebeat.idempotency`) on both backends: a key applies its write
once whatever happens — a retry, two requests racing with one key, a process killed in the middle of the write —
another request under the same key is refused, and expired keys are pruned in bounded batches."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta

import pytest

from oncebeat import idempotency
from oncebeat.errors import IdempotencyKeyReused
from oncebeat.provenance import current_source
from oncebeat.queue import Queue, all_jobs
from oncebeat.store import Store, Tx, open_store
from oncebeat.timebase import SystemClock

BODY = b'{"task": "x"}'


def _enqueue(store: Store, pause: float = 0.0):  # type: ignore[no-untyped-def]
    def write(tx: Tx) -> tuple[int, str]:
        job = Queue(store, clock=SystemClock(), source=current_source("api")).enqueue("x", {}, tx=tx)
        time.sleep(pause)  # hold the transaction open: a racing request must wait for it
        return 201, f'{{"job_id": {job}}}'
    return write


def _once(store: Store, key: str, body: bytes = BODY, pause: float = 0.0) -> idempotency.Answer:
    return idempotency.once(store, client="billing", key=key, method="POST", path="/api/v1/jobs", body=body,
                            now=SystemClock().now(), write=_enqueue(store, pause))


def test_a_retry_is_answered_from_the_ledger_and_another_body_is_refused(store: Store) -> None:
    first = _once(store, "k1")
    again = _once(store, "k1")
    assert (first.replayed, again.replayed) == (False, True) and again.body == first.body and again.status == 201
    with pytest.raises(IdempotencyKeyReused, match="POST /api/v1/jobs"):
        _once(store, "k1", body=b'{"task": "y"}')
    assert len(all_jobs(store)) == 1


def test_two_requests_racing_with_one_key_apply_it_once(store: Store) -> None:
    answers: list[idempotency.Answer] = []
    start = threading.Barrier(4)

    def send() -> None:
        start.wait()
        answers.append(_once(store, "race", pause=0.3))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(answers) == 4 and sorted(a.replayed for a in answers) == [False, True, True, True]
    assert len({a.body for a in answers}) == 1
    assert len(all_jobs(store)) == 1


def test_a_write_that_fails_stores_nothing_and_the_key_applies_later(store: Store) -> None:
    def failing(tx: Tx) -> tuple[int, str]:
        Queue(store, clock=SystemClock(), source=current_source("api")).enqueue("x", {}, tx=tx)
        raise RuntimeError("the connection dropped after the write")

    with pytest.raises(RuntimeError):
        idempotency.once(store, client="billing", key="k", method="POST", path="/p", body=BODY,
                         now=SystemClock().now(), write=failing)
    assert all_jobs(store) == []
    assert not _once(store, "k").replayed
    assert len(all_jobs(store)) == 1


def test_a_process_killed_in_the_middle_of_a_keyed_write_leaves_nothing_applied(store: Store, db_url: str) -> None:
    script = textwrap.dedent(f"""
        import os
        from oncebeat import idempotency
        from oncebeat.provenance import current_source
        from oncebeat.queue import Queue
        from oncebeat.store import open_store
        from oncebeat.timebase import SystemClock
        store = open_store({db_url!r})
        def write(tx):
            Queue(store, clock=SystemClock(), source=current_source("api")).enqueue("x", {{}}, tx=tx)
            os._exit(9)  # killed after the write, before the commit
        idempotency.once(store, client="billing", key="crash", method="POST", path="/api/v1/jobs", body={BODY!r},
                         now=SystemClock().now(), write=write)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    assert all_jobs(store) == []
    assert not _once(store, "crash").replayed and _once(store, "crash").replayed
    assert len(all_jobs(store)) == 1


def test_expired_keys_are_pruned_in_bounded_batches(store: Store, db_url: str) -> None:
    now = SystemClock().now()
    for n in range(5):
        idempotency.once(store, client="c", key=f"old-{n}", method="POST", path="/p", body=b"",
                         now=now - timedelta(hours=25), write=lambda tx: (200, "{}"))
    idempotency.once(store, client="c", key="fresh", method="POST", path="/p", body=b"",
                     now=now - timedelta(hours=23), write=lambda tx: (200, "{}"))
    assert idempotency.prune(store, now=now, limit=3) == 3
    assert idempotency.prune(store, now=now, limit=3) == 2
    assert idempotency.prune(store, now=now) == 0
    replay = idempotency.once(store, client="c", key="fresh", method="POST", path="/p", body=b"", now=now,
                              write=lambda tx: (500, "applied twice"))
    assert replay.replayed and replay.body == "{}"
    with open_store(db_url) as other:  # a pruned key is a new request
        assert not idempotency.once(other, client="c", key="old-0", method="POST", path="/p", body=b"", now=now,
                                    write=lambda tx: (200, "{}")).replayed


def test_a_key_must_be_printable_ascii_of_at_most_255_characters() -> None:
    assert idempotency.key_problem(None) is not None and "Idempotency-Key" in str(idempotency.key_problem(""))
    assert idempotency.key_problem("k" * 256) is not None
    assert idempotency.key_problem("clé") is not None and idempotency.key_problem("a\tb") is not None
    assert idempotency.key_problem("6f1c0c64-91b5-4d7e-9a55-1c8f3f0a2b7e") is None
