"""A clock that meets a lock at start-up does not die (issue 22 item 11).

Clock A stalls inside its fire transaction: the occurrence row is inserted, not committed (a partitioned or
frozen client). Clock B starting a few seconds later waits on that row; its lock wait ends with an error
(``lock_timeout`` on PostgreSQL, ``busy_timeout`` on SQLite). Start-up ran outside the tick's error handling,
so ``oncebeat clock`` exited ("query insert_occurrence …: LockNotAvailable") and nobody fired the instant.
Start-up is now retried as a tick is: once the lock is gone the surviving clock fires the stalled instant
within the misfire grace. Both start orders: B starting while A is stalled, and B already running when A stalls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from oncebeat.app import App
from oncebeat.clock import TZDATA_VERSION, ClockProcess
from oncebeat.provenance import current_source
from oncebeat.store import Store, open_store

PERIOD = 5  # seconds between the schedule's instants


def with_options(url: str, **options: Any) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | {k: str(v) for k, v in options.items()}
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def beat_app() -> App:
    app = App()

    @app.task()
    def work(ctx: Any) -> None:
        pass

    app.schedule("beat", f"every {PERIOD}s", tz="UTC", task="work", catchup="none")
    return app


@contextmanager
def stalled_fire(store: Store, instant: datetime, release: threading.Event) -> Iterator[threading.Event]:
    """Clock A's fire transaction, stalled after inserting the occurrence of ``instant``, until ``release``.

    Yields an event set once the row is inserted (and its lock held). On PostgreSQL the server may end the
    stalled transaction first (idle_in_transaction_session_timeout); the thread then just ends.
    """
    inside = threading.Event()
    held: list[bool] = []

    def stall() -> None:
        try:
            with store.transaction() as tx:
                tx.one("insert_occurrence", schedule_key="beat", fire_at=instant,
                       local_fire_at=instant.isoformat(), tz="UTC", business_date=instant.date(),
                       tzdata_version=TZDATA_VERSION, outcome="enqueued", reason=None, now=instant,
                       **current_source("clock").params())
                held.append(True)
                inside.set()
                release.wait(60)
                raise RuntimeError("clock A never commits")  # the partition: A's row is never committed
        except Exception:  # noqa: BLE001 - rolled back, or ended by the server: either way A's row is gone
            inside.set()

    t = threading.Thread(target=stall, daemon=True)
    t.start()
    try:
        assert inside.wait(30) and held, "clock A never got to hold its fire transaction"
        yield inside
    finally:
        release.set()
        t.join(30)


@pytest.mark.parametrize("order", ["b_starts_while_a_is_stalled", "b_runs_when_a_stalls"])
def test_a_clock_meeting_a_stalled_fire_survives_and_fires_the_instant(backend: str, make_db_url: Any,
                                                                       order: str) -> None:
    base = make_db_url()
    if backend == "postgres":  # shortened for the test: the defaults are 5 s (lock wait) and 20 s (idle in tx)
        url_a = with_options(base, idle_in_transaction_session_timeout="3s")
        url_b = with_options(base, lock_timeout="1s")
    else:  # SQLite: the stalled writer holds the database's write lock; B's waits end after busy_timeout
        url_a, url_b = with_options(base, busy_timeout="20"), with_options(base, busy_timeout="1")
    store_b = open_store(url_b)
    store_b.migrate()
    store_a = open_store(url_a)
    app = beat_app()
    schedule = app.schedules["beat"].schedule()
    lines: list[str] = []
    clock_b = ClockProcess(app, store_b, tick_interval=0.2, echo=lines.append)
    ClockProcess(app, store_a).start()  # clock A has been firing the schedule (a new one starts after its sync)
    release = threading.Event()
    b_thread = threading.Thread(target=clock_b.run, kwargs={"install_signals": False, "stop_after": 45},
                                daemon=True)
    try:
        if order == "b_runs_when_a_stalls":
            b_thread.start()
            deadline = time.monotonic() + 20
            while clock_b.process_id is None and time.monotonic() < deadline:
                time.sleep(0.05)
        instant = schedule.next_after(datetime.now(UTC))
        time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()) + 0.1)
        with stalled_fire(store_a, instant, release):
            if order == "b_starts_while_a_is_stalled":
                b_thread.start()
            if backend == "sqlite":
                # nothing ends a local writer's transaction for it: release A once B has met the lock
                deadline = time.monotonic() + 20
                while not any("failed" in line for line in lines) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if order == "b_starts_while_a_is_stalled":
                    assert any("start-up failed" in line for line in lines), lines
                release.set()
            deadline = time.monotonic() + 40
            fired = None
            while fired is None and time.monotonic() < deadline:
                rows = store_b.read("list_occurrences", schedule_key="beat")
                fired = next((r for r in rows if r["fire_at"] == instant), None)
                time.sleep(0.2)
        assert fired is not None, f"nobody fired {instant.isoformat()}: {lines}"
        assert fired["outcome"] == "enqueued", fired
        late = (fired["created_at"] - instant).total_seconds()
        assert late < 60, f"fired {late:.1f} s after its instant (the misfire grace is 60 s)"
        assert b_thread.is_alive(), "clock B died"
        if backend == "postgres" and order == "b_starts_while_a_is_stalled":
            assert any("start-up failed" in line for line in lines), lines  # the lock was really met at start-up
        # B goes on firing the instants that follow, once each
        next_instant = instant + timedelta(seconds=PERIOD)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            rows = store_b.read("list_occurrences", schedule_key="beat")
            if any(r["fire_at"] == next_instant for r in rows):
                break
            time.sleep(0.2)
        rows = store_b.read("list_occurrences", schedule_key="beat")
        assert any(r["fire_at"] == next_instant for r in rows), "clock B stopped firing"
        assert len({r["fire_at"] for r in rows}) == len(rows)
        jobs = store_b.read("list_jobs", state=None, task=None, limit=1000)
        assert sorted(j["occurrence_id"] for j in jobs) == sorted(r["id"] for r in rows if r["outcome"] == "enqueued")
    finally:
        clock_b.request_stop()
        release.set()
        if b_thread.ident is not None:
            b_thread.join(30)
        store_a.close()
        store_b.close()
