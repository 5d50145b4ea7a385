"""oncebeat: scheduled jobs that run exactly once.

Public API, by topic:

- time: :class:`Clock`, :class:`SystemClock`, :class:`SimulatedClock`
- schedules: :class:`Schedule`, :func:`parse_schedule`
- definitions: :class:`App` (tasks and schedules in code), :class:`ScheduleDef`
- database: :func:`open_store`, :class:`Store`
- queue: :class:`Queue`, :class:`Job`
- effects: :class:`EffectLedger` (use ``ctx.effect(key, fn)`` inside handlers)
- rate limits: :class:`RateLimit` (``@app.task(rate_limit=...)``, ``ctx.rate_limit(...)``), :class:`RateLimiter`
- processes: :class:`ClockProcess`, :class:`Worker`, :class:`JobContext`
- provenance: :func:`current_source`, :class:`Source`
- errors: :class:`OncebeatError` and its subclasses; handler signals :class:`Retry`, :class:`Snooze`, :class:`Discard`

Importing ``oncebeat`` (or any module of it) imports none of these: each name is looked up in its module on first
use (PEP 562), so ``oncebeat --help``, and a command that needs a few modules, do not import the whole engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Imported by every oncebeat process as before (telemetry and this, a few milliseconds): ONCEBEAT_CRASH_AT, the
# kill tests' crash point, is armed whatever the process goes on to import.
from . import crashpoints as _crashpoints  # noqa: F401
from .lazy import lazy_exports

if TYPE_CHECKING:
    from .app import App, ScheduleDef, TaskDef
    from .clock import ClockProcess
    from .effects import EffectAttempt, EffectLedger, Resolution
    from .errors import (
                         ConfigError,
                         Discard,
                         EffectBusy,
                         EffectInDoubt,
                         EffectKeyConflict,
                         OncebeatError,
                         RateLimited,
                         Retry,
                         ScheduleError,
                         Snooze,
                         StoreError,
    )
    from .provenance import VERSION as __version__
    from .provenance import Source, current_source
    from .queue import Job, Queue
    from .ratelimit import RateLimit, RateLimiter
    from .schedules import Schedule, parse_schedule
    from .store import Store, open_store
    from .timebase import Clock, SimulatedClock, SystemClock
    from .worker import JobContext, Worker

#: The module of each public name.
_HOMES = {"App": "app", "ScheduleDef": "app", "TaskDef": "app", "ClockProcess": "clock", "EffectAttempt": "effects",
          "EffectLedger": "effects", "Resolution": "effects", "ConfigError": "errors", "Discard": "errors",
          "EffectBusy": "errors", "EffectInDoubt": "errors", "EffectKeyConflict": "errors",
          "OncebeatError": "errors", "RateLimited": "errors", "Retry": "errors", "ScheduleError": "errors",
          "Snooze": "errors", "StoreError": "errors", "Source": "provenance", "current_source": "provenance",
          "Job": "queue", "Queue": "queue", "RateLimit": "ratelimit", "RateLimiter": "ratelimit",
          "Schedule": "schedules", "parse_schedule": "schedules", "Store": "store", "open_store": "store",
          "Clock": "timebase", "SimulatedClock": "timebase", "SystemClock": "timebase", "JobContext": "worker",
          "Worker": "worker"}

__all__ = [
    # time
    "Clock", "SystemClock", "SimulatedClock",
    # schedules and definitions
    "Schedule", "parse_schedule", "App", "ScheduleDef", "TaskDef",
    # database, queue, effects
    "open_store", "Store", "Queue", "Job", "EffectLedger", "EffectAttempt", "Resolution", "RateLimit", "RateLimiter",
    # processes
    "ClockProcess", "Worker", "JobContext",
    # provenance
    "current_source", "Source",
    # errors and handler signals
    "OncebeatError", "ConfigError", "ScheduleError", "StoreError", "EffectBusy", "EffectInDoubt",
    "EffectKeyConflict", "Retry", "Snooze", "Discard", "RateLimited",
    "__version__",
]


__getattr__, __dir__ = lazy_exports(__name__, {**_HOMES, "__version__": ("provenance", "VERSION")}, globals())
