"""Injectable time: the only place oncebeat reads the wall clock.

Every component asks a :class:`Clock` for ``now()`` (an aware UTC datetime) and
for ``sleep(seconds)``. Production uses :class:`SystemClock`; tests and the
simulator use :class:`SimulatedClock`, which only moves when told to, so months
of schedules run in seconds through the real code paths.

Example::

    clock = SimulatedClock(datetime(2026, 3, 8, 7, 0, tzinfo=UTC))
    clock.advance(3600)          # one hour later, instantly
    assert clock.now().hour == 8
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "SystemClock", "SimulatedClock", "require_aware", "UTC"]


def require_aware(instant: datetime, name: str = "instant") -> datetime:
    """Return ``instant`` converted to UTC; raise ``ValueError`` if it is naive."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (got naive {instant.isoformat()}); use datetime(..., "
                         "tzinfo=UTC)")
    return instant.astimezone(UTC)


class Clock(Protocol):
    """Source of the current instant and of waiting."""

    def now(self) -> datetime:
        """The current instant, an aware datetime in UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (real or simulated)."""
        ...


class SystemClock:
    """Real time: ``datetime.now(UTC)`` and ``time.sleep``."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def describe(self) -> str:
        """The time source in one phrase, for start-up reports."""
        return "host clock (this machine's wall clock)"

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SimulatedClock:
    """Time that moves only by :meth:`advance`, :meth:`set`, :meth:`step` or :meth:`sleep`.

    Thread-safe. ``sleep`` advances the simulated time at once (a simulated
    process that sleeps lets time pass), so loops written against
    :class:`Clock` run unchanged under simulation.
    """

    def __init__(self, start: datetime) -> None:
        self._now = require_aware(start, "start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def describe(self) -> str:
        """The time source in one phrase, for start-up reports."""
        return "simulated clock"

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` (>= 0); return the new instant."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._now = self._now + timedelta(seconds=seconds)
            return self._now

    def step(self, seconds: float) -> datetime:
        """Step the wall clock by ``seconds``, forwards or **backwards**; return the new instant.

        Models an NTP step or an operator's ``date -s``: unlike :meth:`advance`, a negative
        value is allowed, so tests can check that a clock stepped back never repeats an
        occurrence and one stepped forward follows the catch-up policy.
        """
        with self._lock:
            self._now = self._now + timedelta(seconds=seconds)
            return self._now

    def set(self, instant: datetime) -> None:
        """Jump to ``instant`` (aware; must not be earlier than now; use :meth:`step` to go back)."""
        instant = require_aware(instant)
        with self._lock:
            if instant < self._now:
                raise ValueError(f"time only moves forward: {instant.isoformat()} < {self._now.isoformat()}")
            self._now = instant
