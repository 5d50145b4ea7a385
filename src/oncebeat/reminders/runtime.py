"""Wiring for deployments: store, policy, mailer, service and app from the environment.

Environment (12-factor):

- ``DATABASE_URL`` — ``sqlite:///oncebeat.db`` (default) or ``postgresql://…``
- ``SMTP_URL`` — ``smtp://user:pass@host:port``, ``smtp+starttls://…``, ``smtps://…``;
  required by workers that send (the password is never logged)
- ``ONCEBEAT_CONFIG`` — the policy file (default ``./oncebeat.toml``; defaults when absent)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..app import App
from ..deploy import DEFAULT_DATABASE_URL, load_app, open_store_for
from ..deploy import database_url as deployment_url
from ..errors import ConfigError
from ..mail import Mailer
from ..store import Store
from ..targets import install as install_targets
from ..timebase import Clock, SystemClock
from .policy import Policy, load_policy
from .service import ReminderService
from .tasks import build_app

__all__ = ["Runtime", "load_runtime", "load_app", "DEFAULT_DATABASE_URL"]


@dataclass(kw_only=True, slots=True)
class Runtime:
    store: Store
    policy: Policy
    service: ReminderService
    app: App
    clock: Clock
    mailer: Mailer | None

    def fresh_policy(self) -> Policy:
        """The policy as ``oncebeat.toml`` says now (:meth:`ReminderService.current_policy`), kept as
        :attr:`policy` too. Raises ConfigError: the file changed and is invalid (the old settings stay)."""
        self.policy = self.service.current_policy()
        return self.policy

    def close(self) -> None:
        if self.mailer is not None:
            self.mailer.close()
        self.store.close()


def load_runtime(*, config: Path | None = None, database_url: str | None = None, smtp_url: str | None = None,
                 need_smtp: bool = False, migrate: bool = True, app: str | None = None,
                 clock: Clock | None = None, smtp_connections: int = 1) -> Runtime:
    """Open everything a command needs.

    ``need_smtp`` makes a missing ``SMTP_URL`` an error. With ``migrate=False`` (read-only
    commands) the database must already exist and hold oncebeat's schema. ``smtp_connections``: SMTP
    connections the mailer keeps at most (a worker passes its handler slots, so they send side by side),
    capped by the policy's ``[delivery] max_connections``.

    Raises:
        ConfigError: bad policy file, missing SMTP_URL, bad --app.
        StoreError: the database cannot be reached, or (read-only) does not exist / has no schema.
    """
    config = config or (Path(os.environ["ONCEBEAT_CONFIG"]) if os.environ.get("ONCEBEAT_CONFIG") else None)
    policy = load_policy(config)
    smtp = smtp_url or os.environ.get("SMTP_URL")
    if need_smtp and not smtp:
        raise ConfigError("SMTP_URL is not set: workers need it to send reminders, e.g. "
                          "SMTP_URL=smtp://user:password@mail.example.com:587?starttls=true "
                          "(for local testing run `oncebeat mailsink` and use smtp://127.0.0.1:1025)")
    if policy.max_connections is not None:  # [delivery] max_connections caps this process's pool
        smtp_connections = min(smtp_connections, policy.max_connections)
    mailer = Mailer(smtp, connections=smtp_connections) if smtp else None
    store = open_store_for(deployment_url(database_url), migrate=migrate)
    clock = clock or SystemClock()
    service = ReminderService(store, policy, clock=clock, mailer=mailer)
    service.follow_policy_file(config)
    # The reminder app is the default app; a library user's --app runs instead of it, not merged with it.
    registry = load_app(app) if app else build_app(service)
    if policy.schedules:  # [[schedules]] pushed to the team's own workers: added to whichever app runs
        install_targets(registry, policy.schedules)
    return Runtime(store=store, policy=policy, service=service, app=registry, clock=clock, mailer=mailer)
