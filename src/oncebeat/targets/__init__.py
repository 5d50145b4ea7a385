"""oncebeat as the exactly-once clock for a team's existing workers: Celery tasks, Sidekiq jobs, HTTP endpoints.

A schedule's target is pushed once per occurrence (:mod:`.push`): the clock records the occurrence and enqueues
an ``oncebeat.push`` job (G1); the worker pushes inside the effect ledger (G4), in doubt when the broker's or
endpoint's reply was lost. Define target schedules in ``oncebeat.toml`` (``[[schedules]]``, :mod:`.config`) or
in code (:func:`schedule`). ``--app oncebeat.targets:app`` runs an app with the target schedules of
``ONCEBEAT_CONFIG`` (default ``./oncebeat.toml``) and nothing else: a clock for workers written in other
stacks.
"""

from __future__ import annotations

from typing import Any

from .push import PUSH_TASK, install, push_task, schedule
from .spec import KINDS, Occurrence, Target, derived_jid, derived_uuid, effect_key, parse_target

__all__ = ["KINDS", "PUSH_TASK", "Occurrence", "Target", "derived_jid", "derived_uuid", "effect_key", "install",
           "parse_target", "push_task", "schedule", "targets_app"]


def targets_app(config: str | None = None) -> Any:
    """An :class:`~oncebeat.app.App` holding ``oncebeat.push`` and the ``[[schedules]]`` of ``config`` (default
    ``$ONCEBEAT_CONFIG``, else ``./oncebeat.toml``; no file: no schedules).

    Raises:
        ConfigError: the file cannot be read or a ``[[schedules]]`` entry is invalid.
    """
    from ..app import App
    from .config import load_target_schedules

    return install(App(), load_target_schedules(config))


def __getattr__(name: str) -> Any:
    if name == "app":  # `--app oncebeat.targets:app`: built when asked for, from the environment of that moment
        return targets_app()
    raise AttributeError(name)
