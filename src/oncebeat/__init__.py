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
"""

from __future__ import annotations

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
from .provenance import VERSION, Source, current_source
from .queue import Job, Queue
from .ratelimit import RateLimit, RateLimiter
from .schedules import Schedule, parse_schedule
from .store import Store, open_store
from .timebase import Clock, SimulatedClock, SystemClock
from .worker import JobContext, Worker

__version__ = VERSION

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
