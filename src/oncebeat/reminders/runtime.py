"""Wiring for deployments: store, policy, mailer, service and app from the environment.

Environment (12-factor):

- ``DATABASE_URL`` — ``sqlite:///oncebeat.db`` (default) or ``postgresql://…``
- ``SMTP_URL`` — ``smtp://user:pass@host:port``, ``smtp+starttls://…``, ``smtps://…``;
  required by workers that send (the password is never logged)
- ``ONCEBEAT_CONFIG`` — the policy file (default ``./oncebeat.toml``; defaults when absent)
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from ..app import App
from ..errors import ConfigError, StoreError
from ..mail import Mailer
from ..store import Store, open_store
from ..timebase import Clock, SystemClock
from .policy import Policy, load_policy
from .service import ReminderService
from .tasks import build_app

__all__ = ["Runtime", "load_runtime", "load_app", "DEFAULT_DATABASE_URL"]

DEFAULT_DATABASE_URL = "sqlite:///oncebeat.db"


@dataclass(kw_only=True, slots=True)
class Runtime:
    store: Store
    policy: Policy
    service: ReminderService
    app: App
    clock: Clock
    mailer: Mailer | None

    def close(self) -> None:
        if self.mailer is not None:
            self.mailer.close()
        self.store.close()


def load_app(spec: str) -> App:
    """Import ``module:attribute`` and return that :class:`App` (for library users' own tasks).

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


def load_runtime(*, config: Path | None = None, database_url: str | None = None, smtp_url: str | None = None,
                 need_smtp: bool = False, migrate: bool = True, app: str | None = None,
                 clock: Clock | None = None) -> Runtime:
    """Open everything a command needs.

    ``need_smtp`` makes a missing ``SMTP_URL`` an error. With ``migrate=False`` (read-only
    commands) the database must already exist and hold oncebeat's schema.

    Raises:
        ConfigError: bad policy file, missing SMTP_URL, bad --app.
        StoreError: the database cannot be reached, or (read-only) does not exist / has no schema.
    """
    config = config or (Path(os.environ["ONCEBEAT_CONFIG"]) if os.environ.get("ONCEBEAT_CONFIG") else None)
    policy = load_policy(config)
    url = database_url or os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    smtp = smtp_url or os.environ.get("SMTP_URL")
    if need_smtp and not smtp:
        raise ConfigError("SMTP_URL is not set: workers need it to send reminders, e.g. "
                          "SMTP_URL=smtp://user:password@mail.example.com:587?starttls=true "
                          "(for local testing run `oncebeat mailsink` and use smtp://127.0.0.1:1025)")
    mailer = Mailer(smtp) if smtp else None
    store = open_store(url, create=migrate)
    if migrate:
        store.migrate()
    elif not store.applied_migrations():
        store.close()
        raise StoreError(f"{store.url} has no oncebeat tables; is DATABASE_URL / --db right? "
                         "(`oncebeat migrate` creates them)")
    clock = clock or SystemClock()
    service = ReminderService(store, policy, clock=clock, mailer=mailer)
    reminders_app = build_app(service)
    if app:
        user = load_app(app)
        for name, task in reminders_app.tasks.items():
            user.tasks.setdefault(name, task)
        reminders_app = user
    return Runtime(store=store, policy=policy, service=service, app=reminders_app, clock=clock, mailer=mailer)
