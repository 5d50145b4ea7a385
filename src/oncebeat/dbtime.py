"""Time sources for clocks: the host's wall clock (default) or the database server's clock.

A clock decides what is due by comparing fire instants with ``now()``. With
``time_source = "host"`` each clock process reads its own machine's wall clock;
hosts whose clocks disagree then disagree about what is due (the occurrence
ledger still keeps every instant to one job, G1). With
``time_source = "database"`` every clock reads PostgreSQL's
``clock_timestamp()``: one clock for every host.

:class:`DatabaseClock` reads the server's time at most once per ``refresh``
seconds and advances it in between with the host's monotonic clock (so a tick
costs no extra round trip and the reading never goes backwards between
refreshes); a step of the server's clock is seen at the next refresh.

SQLite has no server clock (it would be this host's clock again), so
``time_source = "database"`` is refused there with a :class:`ConfigError`.

Example::

    clock = time_source_clock(store, "database")   # PostgreSQL only
    ClockProcess(app, store, clock=clock).run()
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

from .errors import ConfigError
from .store import Store
from .timebase import UTC, Clock, SystemClock

__all__ = ["TIME_SOURCES", "SKEW_WARNING_SECONDS", "DatabaseClock", "database_now", "describe_time_source",
           "host_skew", "time_source_clock"]

TIME_SOURCES: tuple[str, ...] = ("host", "database")
SKEW_WARNING_SECONDS = 1.0  # a process on host time warns at start past this skew from the database's clock


def database_now(store: Store) -> datetime:
    """The database's own clock, read afresh, aware UTC: PostgreSQL's ``clock_timestamp()``; SQLite has no
    server, so there it is the calling host's clock.

    Raises:
        StoreError / TransientStoreError: the database could not be read.
    """
    now: datetime = store.read("database_now")[0]["now"]
    return now.astimezone(UTC)


def host_skew(store: Store, host: Clock | None = None) -> float | None:
    """Seconds by which ``host`` (default this machine's wall clock) is ahead of PostgreSQL's clock (negative:
    behind), the round trip's midpoint taken as the server's reading; None on SQLite (one host, one clock).

    Raises:
        StoreError / TransientStoreError: the database could not be read.
    """
    if store.backend != "postgres":
        return None
    host = host or SystemClock()
    before = host.now()
    server = database_now(store)
    after = host.now()
    return ((before + (after - before) / 2) - server).total_seconds()


class DatabaseClock:
    """``now()`` from the PostgreSQL server (``clock_timestamp()``); ``sleep`` is a real sleep.

    Args:
        store: a PostgreSQL store.
        refresh: seconds between reads of the server's clock (>= 0; 0 reads it on every call).

    Raises:
        ConfigError: ``store`` is SQLite.
    """

    def __init__(self, store: Store, *, refresh: float = 1.0) -> None:
        if store.backend != "postgres":
            raise ConfigError(
                "time_source = database needs PostgreSQL: SQLite has no server clock (it would read this host's "
                "clock, the same as time_source = host). Use time_source = host with SQLite, or point "
                "DATABASE_URL at PostgreSQL.")
        self.store = store
        self.refresh = refresh
        self._lock = threading.Lock()
        self._base: datetime | None = None
        self._base_mono = 0.0
        self.last_skew: float | None = None  # host wall clock minus server clock at the last read, seconds

    def _read(self) -> None:
        before = time.monotonic()
        server = database_now(self.store)
        after = time.monotonic()
        host = datetime.now(UTC)
        # The server answered somewhere in [before, after]: take the midpoint.
        self._base, self._base_mono = server, (before + after) / 2
        self.last_skew = (host - (server + timedelta(seconds=after - self._base_mono))).total_seconds()

    def now(self) -> datetime:
        with self._lock:
            mono = time.monotonic()
            if self._base is None or mono - self._base_mono >= self.refresh:
                self._read()
                mono = time.monotonic()
            assert self._base is not None
            return (self._base + timedelta(seconds=mono - self._base_mono)).astimezone(UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def describe(self) -> str:
        """The time source in one phrase, with the host's skew from it, for start-up reports."""
        self.now()
        skew = f"; this host's clock is {self.last_skew:+.3f} s from it" if self.last_skew is not None else ""
        return f"database clock (PostgreSQL clock_timestamp(), the same for every host{skew})"


def time_source_clock(store: Store, time_source: str) -> Clock:
    """The :class:`Clock` for ``time_source`` ("host" or "database") on ``store``.

    Raises:
        ConfigError: an unknown time source, or "database" on SQLite.
    """
    if time_source == "host":
        return SystemClock()
    if time_source == "database":
        return DatabaseClock(store)
    raise ConfigError(f"time_source must be one of {', '.join(TIME_SOURCES)}, not {time_source!r} "
                      "(--time-source or ONCEBEAT_TIME_SOURCE)")


def describe_time_source(clock: Clock) -> str:
    """One phrase naming where ``clock`` gets its time (its ``describe()``, else its class name)."""
    describe = getattr(clock, "describe", None)
    return str(describe()) if callable(describe) else type(clock).__name__
