"""The sections another module checks: ``[[schedules]]`` (:mod:`oncebeat.targets.config`), ``[calendar]``
(:mod:`oncebeat.reminders.calendar`), ``[source]`` (:mod:`oncebeat.reminders.sources.database`), ``[[ladders]]``
(:mod:`oncebeat.reminders.ladders`), ``[attachments]`` (:mod:`oncebeat.reminders.notices.attachments`) and
``[stage.N]`` (:mod:`oncebeat.reminders.notices.escalation`).

The file is read by :func:`~oncebeat.reminders.policy.loading.policy_from_dict`, which calls those modules; the
checks here accept what they built when a :class:`~oncebeat.reminders.policy.Policy` is made directly (a
``[stage.N]`` table may also be given as its TOML dict).
"""

from __future__ import annotations

from typing import Any

from oncebeat.app import ScheduleDef
from oncebeat.errors import ConfigError
from oncebeat.reminders.calendar import BusinessCalendar
from oncebeat.reminders.notices.attachments import AttachmentPolicy
from oncebeat.reminders.notices.escalation import escalation_config
from oncebeat.reminders.policy.problems import _Invalid
from oncebeat.reminders.sources.database import SourceConfig


def _check_target_schedules(value: Any) -> tuple[ScheduleDef, ...]:
    if not all(isinstance(d, ScheduleDef) for d in value):
        raise _Invalid("must be schedule definitions", "Build them with oncebeat.targets.config.target_schedules.",
                       value=value)
    return tuple(value)


def _check_calendar(value: Any) -> BusinessCalendar | None:
    if value is not None and not isinstance(value, BusinessCalendar):
        raise _Invalid("must be a business calendar", "Build it with oncebeat.reminders.calendar.calendar_config.",
                       value=value)
    return value


def _check_source(value: Any) -> SourceConfig | None:
    if value is not None and not isinstance(value, SourceConfig):
        raise _Invalid("must be a source definition", "Build it with oncebeat.reminders.sources.database."
                       "source_config.", value=value)
    return value


def _check_ladders(value: Any) -> tuple[Any, ...]:
    from oncebeat.reminders.ladders import ladder_defs  # ladders builds on this module: imported when used

    try:
        return ladder_defs(list(value) if isinstance(value, tuple) and not value else value)
    except ConfigError as exc:
        raise _Invalid(str(exc).removeprefix("<dict>: "), "See README, \"Several ladders\".",
                       show_value=False) from None


def _check_attachments(value: Any) -> AttachmentPolicy | None:
    if value is not None and not isinstance(value, AttachmentPolicy):
        raise _Invalid("must be an attachments policy", "Build it with oncebeat.reminders.notices.attachments."
                       "attachments_config.", value=value)
    return value


def _check_escalation(value: Any) -> tuple[Any, ...]:
    found, problems = escalation_config(value, where=lambda k: f"[stage.{k}]")
    if problems:
        raise _Invalid("; ".join(p.rstrip(".") for p in problems), "See README, \"Escalation and fees\"",
                       show_value=False)
    return found
