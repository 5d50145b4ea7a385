"""Bounded stalls on PostgreSQL (issue 9 item 6): a partitioned clock never blocks the others for long.

A clock cut off by a network partition in the middle of its fire transaction holds the uncommitted
occurrence row; every other clock's insert of that instant waits for it. The server ends the abandoned
transaction (``idle_in_transaction_session_timeout``), the clock's own transactions give up a lock wait
(``lock_timeout``) and try again on the next tick, so the surviving clock fires the instant within the
60 s misfire grace. The partition is real TCP: clock A talks to PostgreSQL through a proxy on 127.0.0.1
that stops forwarding (its sockets stay open, as a dropped route looks to both ends).

PostgreSQL only: a SQLite database is a local file with no network to partition; its waits are bounded
by ``busy_timeout``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from oncebeat import telemetry
from oncebeat.app import App
from oncebeat.clock import ClockProcess
from oncebeat.errors import OncebeatError, StoreError
from oncebeat.store import open_store
from oncebeat.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


class BlackholeProxy:
    """A TCP proxy 127.0.0.1:port → upstream that can stop forwarding while keeping every socket open."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.blackholed = threading.Event()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while not self.closed.is_set():
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.blackholed.is_set():
                continue  # the partition: bytes vanish, nobody is told
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.closed.set()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def with_options(url: str, **options: Any) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | {k: str(v) for k, v in options.items()}
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def app_every(seconds: int) -> App:
    app = App()

    @app.task()
    def work(ctx: Any) -> None:
        pass

    app.schedule("beat", f"every {seconds}s", tz="UTC", task="work", catchup="none")
    return app


@pytest.fixture
def proxy(pg_db_url: str) -> Iterator[BlackholeProxy]:
    parts = urlsplit(pg_db_url)
    p = BlackholeProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield p
    p.close()


def test_partitioned_clock_mid_fire_does_not_stop_the_other(pg_db_url: str, proxy: BlackholeProxy) -> None:
    # Shortened for the test: the defaults are 20 s (idle in transaction) and 5 s (lock wait).
    direct = with_options(pg_db_url, lock_timeout="1s", idle_in_transaction_session_timeout="3s")
    parts = urlsplit(direct)
    via_proxy = urlunsplit((parts.scheme, f"{parts.username}@127.0.0.1:{proxy.port}", parts.path, parts.query, ""))
    store_b = open_store(direct)
    store_b.migrate()
    store_a = open_store(via_proxy)
    app = app_every(3)
    clock_a = ClockProcess(app, store_a, tick_interval=0.05)
    clock_b = ClockProcess(app, store_b, tick_interval=0.2)
    clock_a.start()
    clock_b.start()

    a_thread: list[threading.Thread] = []
    held: dict[str, Any] = {}
    inside = threading.Event()

    def pause_a(event: str, data: Any) -> None:  # clock A inserted the occurrence row, before its commit
        if threading.current_thread() in a_thread and not inside.is_set():
            held["instant"] = time.time() - data["lag_seconds"]
            proxy.blackholed.set()
            inside.set()
            proxy.closed.wait()  # frozen until the test ends (then its next statement fails)

    def run_a() -> None:
        try:
            while not inside.is_set():
                clock_a.tick()
                time.sleep(0.05)
        except (OncebeatError, OSError):
            pass

    telemetry.attach("occurrence.recorded", pause_a)
    try:
        a_thread.append(threading.Thread(target=run_a, daemon=True))
        a_thread[0].start()
        assert inside.wait(10), "clock A never reached its fire"
        held_instant = datetime.fromtimestamp(round(held["instant"]), tz=UTC)
        deadline = time.monotonic() + 60
        fired: list[Any] = []
        failures = 0
        while time.monotonic() < deadline:
            try:
                fired += [f for f in clock_b.tick() if f.inserted and f.outcome == "enqueued"]
            except OncebeatError:
                failures += 1  # a lock wait given up (lock_timeout): the next tick tries again
            if fired:
                break
            time.sleep(0.2)
        assert fired, "clock B never fired while clock A was partitioned mid-transaction"
        first = fired[0]
        assert first.fire_at in (held_instant, held_instant + timedelta(seconds=3))  # that instant or the next
        rows = store_b.read("list_occurrences", schedule_key="beat")
        by_instant = {r["fire_at"]: r for r in rows}
        assert len(by_instant) == len(rows)  # one occurrence per instant
        row = by_instant[first.fire_at]
        late = (row["created_at"] - row["fire_at"]).total_seconds()
        assert late < 60, f"fired {late:.1f} s after its instant"
        assert row["outcome"] == "enqueued"
        jobs = store_b.read("list_jobs", state=None, task=None, limit=1000)
        assert sorted(j["occurrence_id"] for j in jobs) == sorted(r["id"] for r in rows if r["outcome"] == "enqueued")
        print(f"clock B fired {first.fire_at.isoformat()} {late:.1f} s after the instant "
              f"({failures} tick(s) gave up a lock wait)")
    finally:
        telemetry.detach("occurrence.recorded", pause_a)
        proxy.close()
        store_b.close()
        store_a.close()


def test_url_sets_stall_bounds_and_keepalives(pg_db_url: str) -> None:
    store = PostgresStore(with_options(pg_db_url, keepalives_idle=30, lock_timeout="2s"))
    try:
        assert "keepalives_idle=30" in store._conninfo and "tcp_user_timeout=30000" in store._conninfo
        with store.transaction() as tx:
            session = tx.execute("SELECT current_setting('idle_in_transaction_session_timeout') AS idle, "
                                 "current_setting('lock_timeout') AS lock")[0]
        with store.transaction(bounded=True) as tx:
            bounded = tx.execute("SELECT current_setting('lock_timeout') AS lock, "
                                 "current_setting('statement_timeout') AS stmt")[0]
        with store.transaction() as tx:  # SET LOCAL: the pooled connection is back to its defaults
            after = tx.execute("SELECT current_setting('lock_timeout') AS lock")[0]
    finally:
        store.close()
    assert session == {"idle": "20s", "lock": "0"}
    assert bounded == {"lock": "2s", "stmt": "15s"}
    assert after == {"lock": "0"}
    own = PostgresStore(with_options(pg_db_url, options="-c idle_in_transaction_session_timeout=90s"))
    try:
        with own.transaction() as tx:
            assert tx.execute("SELECT current_setting('idle_in_transaction_session_timeout') AS v")[0]["v"] == "90s"
    finally:
        own.close()
    with pytest.raises(StoreError, match=r"statement_timeout must be a duration.*'soon'.*statement_timeout=15s"):
        PostgresStore(with_options(pg_db_url, statement_timeout="soon"))
