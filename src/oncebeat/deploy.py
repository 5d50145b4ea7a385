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
from dataclasses import dataclass

from .app import App
from .errors import ConfigError, StoreError
from .store import Store, open_store
from .timebase import Clock, SystemClock

__all__ = ["Deployment", "load_app", "open_deployment", "open_store_for", "database_url", "DEFAULT_DATABASE_URL"]

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

    Raises:
        ConfigError: the module or attribute cannot be found, or it is not an App.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--app {spec!r}: use the form package.module:app")
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
