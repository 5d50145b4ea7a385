"""Fencing and dropped connections (issue 9, items 5 and 8) in one process on simulated time, both backends.

A second worker that "rescues and re-claims" a job while the first one runs it is another :class:`Worker`
on the same store; time moves only when the test says. The real-process versions (SIGSTOP, a cut heartbeat,
terminated PostgreSQL backends) are in tests/acceptance/test_fencing_processes.py and test_dropped_connections.py.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from conftest import _libpq_url
from oncebeat import telemetry
from oncebeat.app import App
from oncebeat.effects import EffectLedger, Holder
from oncebeat.errors import LeaseLost, Retry, TransientStoreError
from oncebeat.provenance import current_source
from oncebeat.queue import Queue
from oncebeat.store import Store, open_store
from oncebeat.timebase import SimulatedClock
from oncebeat.worker import Worker

LEASE = 30.0


@pytest.fixture
def events() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    got: list[tuple[str, dict[str, Any]]] = []

    def record(event: str, data: Mapping[str, Any]) -> None:
        got.append((event, dict(data)))

    for name in ("job.lost", "worker.fenced"):
        telemetry.attach(name, record)
    yield got
    for name in ("job.lost", "worker.fenced"):
        telemetry.detach(name, record)


class Work:
    """Task ``step(n)``: runs ``before(n)`` (the test's moves of time and of other workers), then one effect."""

    def __init__(self, store: Store, clock: SimulatedClock) -> None:
        self.store, self.clock = store, clock
        self.ran: list[int] = []  # bodies started
        self.sent: list[int] = []  # effects that happened
        self.before: dict[int, Any] = {}
        self.app = App()

        @self.app.task(max_attempts=5)
        def step(ctx: Any, n: int) -> None:
            self.ran.append(n)
            if n in self.before:
                self.before.pop(n)(ctx)
            ctx.effect(f"step:{n}", lambda: self.sent.append(n), payload={"n": n})

    def worker(self, **options: Any) -> Worker:
        return Worker(self.app, self.store, clock=self.clock, lease_seconds=LEASE, source=current_source("worker"),
                      **options)

    def queue(self) -> Queue:
        return Queue(self.store, clock=self.clock, source=current_source("api"))

    def state(self, job_id: int) -> str:
        job = self.queue().get(job_id)
        assert job is not None
        return job.state


@pytest.fixture
def work(store: Store, sim_clock: SimulatedClock) -> Work:
    return Work(store, sim_clock)


def test_an_expired_lease_is_not_renewed_and_the_heartbeat_says_which_jobs_are_still_held(
        work: Work, sim_clock: SimulatedClock) -> None:
    q = work.queue()
    wid = work.worker().register()
    first, second = q.enqueue("step", {"n": 1}), q.enqueue("step", {"n": 2})
    assert first is not None and second is not None
    [one] = q.claim(wid, limit=1, lease_seconds=10)
    [two] = q.claim(wid, limit=1, lease_seconds=40)
    sim_clock.advance(20)
    assert q.extend_leases(wid, [first, second], lease_seconds=LEASE) == {second: two.attempt}
    assert [r["id"] for r in q.rescue()] == [first], "the expired one belongs to the rescue"


def test_an_effect_is_refused_to_an_attempt_that_no_longer_holds_its_job(
        work: Work, store: Store, sim_clock: SimulatedClock) -> None:
    q = work.queue()
    job_id = q.enqueue("step", {"n": 1})
    old_wid, new_wid = work.worker().register(), work.worker().register()
    [old] = q.claim(old_wid, lease_seconds=LEASE)
    ledger = EffectLedger(store, clock=sim_clock, source=current_source("worker"))
    ran: list[str] = []
    sim_clock.advance(LEASE + 1)
    with pytest.raises(LeaseLost, match=f"job {job_id} attempt 1: lease lost"):  # expired, not yet rescued
        ledger.run("charge:1", lambda: ran.append("old"), holder=Holder(job_id=old.id, attempt=old.attempt,
                                                                         process_id=old_wid))
    q.rescue()
    [new] = q.claim(new_wid, lease_seconds=LEASE)
    with pytest.raises(LeaseLost):  # rescued and re-claimed by another worker
        ledger.run("charge:1", lambda: ran.append("old"), holder=Holder(job_id=old.id, attempt=old.attempt,
                                                                         process_id=old_wid))
    assert ledger.get("charge:1") is None, "a refused claim records nothing"
    ledger.run("charge:1", lambda: ran.append("new"), holder=Holder(job_id=new.id, attempt=new.attempt,
                                                                     process_id=new_wid))
    assert ran == ["new"]


def test_a_job_of_the_batch_whose_lease_was_lost_before_it_started_is_dropped_not_run(
        work: Work, sim_clock: SimulatedClock, events: list[tuple[str, dict[str, Any]]]) -> None:
    q = work.queue()
    first, second = q.enqueue("step", {"n": 1}), q.enqueue("step", {"n": 2})
    assert first is not None and second is not None
    slow = work.worker(batch_size=2)
    other = work.worker()

    def frozen_past_the_lease(ctx: Any) -> None:  # meanwhile another worker rescues and runs job 2
        sim_clock.advance(LEASE + 1)
        other.rescue()
        other.drain()

    work.before[1] = frozen_past_the_lease
    slow.drain()
    assert work.ran == [1, 1, 2], "job 1 was in flight at the freeze (run twice); job 2 ran once, on the other worker"
    assert work.sent == [1, 2], "each effect once: the frozen attempt's effect was refused"
    lost = sorted(d["started"] for e, d in events if e == "job.lost")
    assert lost == [False, True], "job 2 dropped before it started, job 1 stopped at its effect"
    assert work.state(first) == "completed" and work.state(second) == "completed"


def test_a_long_job_renews_its_lease_before_an_effect_when_it_still_holds_it(
        work: Work, sim_clock: SimulatedClock, events: list[tuple[str, dict[str, Any]]]) -> None:
    job_id = work.queue().enqueue("step", {"n": 1})
    assert job_id is not None
    work.before[1] = lambda ctx: sim_clock.advance(LEASE * 0.9)  # nobody took it: drain mode renews it
    work.worker().drain()
    assert work.sent == [1] and work.state(job_id) == "completed" and events == []


def test_completions_are_committed_within_complete_within_not_only_with_the_next_claim(
        work: Work, sim_clock: SimulatedClock) -> None:
    q = work.queue()
    ids = [q.enqueue("step", {"n": n}) for n in range(4)]
    seen: dict[int, str] = {}

    def look(ctx: Any) -> None:
        sim_clock.advance(0.3)
        seen[ctx.job.args["n"]] = work.state(ids[0] or 0)

    for n in range(4):
        work.before[n] = look
    work.worker(batch_size=4, complete_within=0.5).drain()
    # Job 0 ended at 0.3 s; serially, its completion is committed at the first job end 0.5 s later (0.9 s),
    # not with the next claim (after job 3).
    assert seen == {0: "running", 1: "running", 2: "running", 3: "completed"}


def test_a_worker_whose_heartbeats_fail_to_the_end_of_its_lease_fences_itself(
        work: Work, store: Store, sim_clock: SimulatedClock, events: list[tuple[str, dict[str, Any]]]) -> None:
    job_id = work.queue().enqueue("step", {"n": 1})
    assert job_id is not None
    worker = work.worker()
    cut = {"on": False}

    def before_statement(name: str) -> None:
        if cut["on"] and name in ("heartbeat_process", "extend_leases"):
            raise TransientStoreError(f"query {name}: connection cut (test fault)")

    def heartbeats_fail(ctx: Any) -> None:
        cut["on"] = True
        worker.heartbeat()  # fails (its retries move simulated time by 1.3 s): no fencing yet, a blip
        assert not events
        sim_clock.advance(LEASE - worker.fence_margin.total_seconds())
        worker.heartbeat()  # still failing at the lease's end: self-fencing

    store.before_statement = before_statement
    work.before[1] = heartbeats_fail
    worker.drain()
    assert work.sent == [], "no effect is started after self-fencing"
    assert [e for e, _ in events] == ["worker.fenced", "job.lost"]
    assert work.state(job_id) == "running", "nothing recorded: the rescue owns it once the lease ends"
    cut["on"] = False
    sim_clock.advance(LEASE)
    other = work.worker()
    other.rescue()
    other.drain()
    assert work.sent == [1] and work.state(job_id) == "completed"


# --- PostgreSQL: dropped connections ---------------------------------------------------------------------


def _tagged(url: str, tag: str, *, netloc: str | None = None) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, netloc or parts.netloc, parts.path,
                       urlencode([*parse_qsl(parts.query), ("application_name", tag)]), parts.fragment))


def _terminate(url: str, tag: str) -> int:
    with psycopg.connect(_libpq_url(url), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE application_name = %s", (tag,)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.postgres
def test_the_pool_hands_out_a_live_connection_after_the_server_terminated_all_of_them(pg_db_url: str) -> None:
    tag = f"ob_pool_{secrets.token_hex(4)}"
    with open_store(_tagged(pg_db_url, tag)) as store:
        store.migrate()
        hold = threading.Barrier(4)

        def use() -> None:  # four connections at once: the pool keeps four
            with store.transaction() as tx:
                tx.execute("SELECT 1")
                hold.wait(timeout=10)

        threads = [threading.Thread(target=use) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert _terminate(pg_db_url, tag) >= 4
        started = time.monotonic()
        for _ in range(4):  # no caller meets a dead connection
            assert store.read("count_jobs_by_state") == []
        assert time.monotonic() - started < 5


class _Proxy:
    """A TCP proxy to PostgreSQL that can go down (every connection cut, new ones refused) and come back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.down = threading.Event()
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down.is_set():
                client.close()
                continue
            server = socket.create_connection(self.target)
            with self.lock:
                self.socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def cut(self) -> None:
        self.down.set()
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.socks.clear()

    def heal(self) -> None:
        self.down.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_after_a_database_outage_the_pool_reconnects_within_seconds(pg_db_url: str) -> None:
    parts = urlsplit(pg_db_url)
    proxy = _Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        with open_store(_tagged(pg_db_url, "ob_outage", netloc=f"{parts.username}@127.0.0.1:{proxy.port}")) as store:
            store.migrate()
            assert store.read("count_jobs_by_state") == []
            proxy.cut()
            back: list[float] = []

            def call_through_the_outage() -> None:
                while True:
                    try:
                        store.read("count_jobs_by_state")
                    except TransientStoreError:
                        continue
                    back.append(time.monotonic())
                    return

            caller = threading.Thread(target=call_through_the_outage)
            time.sleep(0.5)
            caller.start()
            time.sleep(20)  # psycopg_pool's own backoff (1, 2, 4, 8, 16 s) would try again 11 s after the heal
            healed = time.monotonic()
            proxy.heal()
            caller.join(timeout=60)
            assert back, "the store never came back"
            print(f"\nback {back[0] - healed:.2f} s after the database came back")
            assert back[0] - healed < 5
    finally:
        proxy.close()


def test_every_store_call_of_the_worker_loop_is_retried_after_a_dropped_connection(store: Store) -> None:
    """Item 8 on both backends: each statement of the loop fails once as a cut connection would; the worker
    (the real :meth:`Worker.run`, real time) retries every one on a fresh transaction and finishes its work."""
    app = App()
    runs: list[int] = []

    @app.task(max_attempts=5)
    def flaky(ctx: Any, n: int) -> None:
        runs.append(n)
        if n == 2:
            time.sleep(1.0)  # spans a heartbeat (every 0.5 s), which renews its lease
        if ctx.job.attempt == 1 and n == 0:
            raise Retry("once more", delay=0.0)

    worker = Worker(app, store, lease_seconds=1.5, poll_interval=0.05, rescue_interval=0.2)
    q = Queue(store, clock=worker.clock, source=current_source("api"))
    ids = [q.enqueue("flaky", {"n": n}) for n in range(3)]
    cut = {"claim_jobs", "complete_jobs", "fail_job", "heartbeat_process", "extend_leases", "rescue_jobs"}
    failed: set[str] = set()

    def drop_once(name: str) -> None:
        if name in cut and name not in failed:
            failed.add(name)
            raise TransientStoreError(f"query {name}: server closed the connection unexpectedly (test fault)")

    finished = threading.Event()

    def stop_when_done() -> None:
        while not finished.wait(0.05):
            if all(q.get(i or 0).state == "completed" for i in ids) and failed == cut:  # type: ignore[union-attr]
                worker.request_stop()
                return

    store.before_statement = drop_once
    watcher = threading.Thread(target=stop_when_done, daemon=True)
    watcher.start()
    try:
        counts = worker.run(install_signals=False, stop_after=30)
    finally:
        finished.set()
        store.before_statement = None
    assert failed == cut, f"never reached: {cut - failed}"
    assert [q.get(i or 0).state for i in ids] == ["completed"] * 3  # type: ignore[union-attr]
    assert sorted(runs) == [0, 0, 1, 2] and counts["processed"] == 3
