"""Deployment wiring for the engine: the database and the app to run, from the environment or flags.

Environment (12-factor), read by every command:

- ``DATABASE_URL`` — ``sqlite:///oncebeat.db`` (default) or ``postgresql://…``
- ``--app package.module:app`` — a library user's :class:`~oncebeat.app.App`; without it the CLI runs the
  reminder app (``oncebeat.reminders``), which adds ``SMTP_URL`` and ``ONCEBEAT_CONFIG``.

This module knows no app: a user's app gets the engine's tables (schedules, occurrences, jobs, effects,
processes, events) and the SQL lines its own modules register, nothing of the reminder app.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .app import App
from .errors import ConfigError, StoreError
from .store import Store, open_store
from .timebase import Clock, SystemClock

__all__ = ["Deployment", "load_app", "open_deployment", "open_store_for", "database_url", "run_together",
           "DEFAULT_DATABASE_URL"]

DEFAULT_DATABASE_URL = "sqlite:///oncebeat.db"


def database_url(explicit: str | None = None) -> str:
    """``explicit`` (``--db``), else ``$DATABASE_URL``, else :data:`DEFAULT_DATABASE_URL`; surrounding whitespace
    (a trailing newline) stripped, an empty or blank value counting as not given."""
    return (explicit or "").strip() or (os.environ.get("DATABASE_URL") or "").strip() or DEFAULT_DATABASE_URL


@dataclass(kw_only=True, slots=True)
class Deployment:
    """What an engine command runs with: the store, the app's registry and the clock."""

    store: Store
    app: App
    clock: Clock

    def close(self) -> None:
        self.store.close()


def load_app(spec: str) -> App:
    """Import ``module:attribute`` and return that :class:`App` (for library users' own tasks).

    Importing the module registers any SQL line it owns (:func:`oncebeat.store.sqlfiles.register_line`).
    The current folder is searched first, as Celery's ``-A`` does, so ``--app tasks:app`` finds ``./tasks.py``
    whichever way ``oncebeat`` was started (its console script puts only its own folder on ``sys.path``).

    Raises:
        ConfigError: the module or attribute cannot be found, or it is not an App.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--app {spec!r}: use the form package.module:app")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--app {spec!r}: cannot import {module_name!r}: {exc}") from exc
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise ConfigError(f"--app {spec!r}: {attr!r} in {module_name} is not an oncebeat.App")
    return app


def open_store_for(url: str, *, migrate: bool) -> Store:
    """Open ``url``; migrate the registered SQL lines, or (``migrate=False``) require an existing schema.

    Raises:
        StoreError: the database cannot be reached, or (read-only) does not exist / has no oncebeat tables.
    """
    store = open_store(url, create=migrate)
    if migrate:
        store.migrate()
    elif not store.schema_versions():
        store.close()
        raise StoreError(f"{store.url} has no oncebeat tables; is DATABASE_URL / --db right? "
                         "(`oncebeat migrate` creates them)")
    return store


def open_deployment(app: str | App, *, url: str | None = None, migrate: bool = True,
                    clock: Clock | None = None) -> Deployment:
    """Open the store for a library user's ``app`` (a ``module:attr`` spec or an :class:`App`).

    Raises:
        ConfigError: a bad app spec.
        StoreError: see :func:`open_store_for`.
    """
    registry = load_app(app) if isinstance(app, str) else app
    return Deployment(store=open_store_for(database_url(url), migrate=migrate), app=registry,
                      clock=clock or SystemClock())


def run_together(app: App, store: Store, *, clock: Clock | None = None, concurrency: int = 4,
                 queues: Sequence[str] = ("default",), install_signals: bool = True,
                 echo: Callable[[str], Any] | None = None, stop_after: float | None = None,
                 worker_options: dict[str, Any] | None = None) -> dict[str, int]:
    """Run the clock and a worker in this process until SIGTERM/SIGINT (or ``stop_after`` seconds).

    What ``oncebeat run`` and :meth:`App.run` do: the clock in a thread, the worker in the calling thread; a
    signal stops both, the worker returning its unstarted jobs to the queue. The store stays open (the caller
    owns it).

    Args:
        clock: time source of the clock and the worker's leases (default the host's; see
            ``oncebeat.dbtime.time_source_clock``).
        concurrency: the worker's handler slots.
        queues: the queues the worker claims from.
        install_signals: handle SIGTERM and SIGINT (only possible in the main thread).
        echo: where the clock prints its start-up decisions (default: nowhere).
        stop_after: stop by itself after this many seconds (tests, one-off runs).
        worker_options: further keyword arguments of :class:`~oncebeat.worker.Worker` (lease_seconds, ...).
    Returns:
        The worker's counts (``processed``, ``returned``, ...).
    """
    from .clock import ClockProcess  # the clock and the worker import this module's neighbours: import late
    from .worker import Worker

    clk = ClockProcess(app, store, clock=clock, echo=echo)
    # the worker judges leases by the same clock as the clock process fires by (the database's, if chosen)
    wrk = Worker(app, store, clock=clock, queues=queues, concurrency=concurrency, **(worker_options or {}))

    def stop(*_: Any) -> None:
        clk.request_stop()
        wrk.request_stop()

    if install_signals:
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    t = threading.Thread(target=clk.run, kwargs={"install_signals": False}, name="oncebeat-clock", daemon=True)
    t.start()
    try:
        counts = wrk.run(install_signals=False, stop_after=stop_after)
    finally:
        clk.request_stop()
        t.join(timeout=5)
    return counts
