"""``[[schedules]]`` in oncebeat.toml: schedules whose occurrences are pushed to a team's own workers.

::

    [[schedules]]
    key = "overdue-reminders"
    cron = "0 8 * * *"                  # or "every 15m"
    tz = "America/Chicago"
    target = "sidekiq:OverdueReminderJob"
    redis = "$REDIS_URL"                # the worker reads the variable at each push
    queue = "default"
    args = []

Schedule keys: ``key``, ``cron``, ``tz``, ``target``, ``catchup``, ``catchup_window`` (seconds or "90s", "15m",
"24h", "2d"), ``overlap``, ``dst_gap``, ``dst_fold``; every other key is an option of the target
(:mod:`oncebeat.targets.spec`). Each problem is reported with the entry's number and key, the field and the fix.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from ..app import ScheduleDef
from ..errors import ConfigError, ScheduleError
from .push import PUSH_TASK
from .spec import parse_target

__all__ = ["SCHEDULE_FIELDS", "load_target_schedules", "target_schedules"]

SCHEDULE_FIELDS = ("key", "cron", "tz", "target", "catchup", "catchup_window", "overlap", "dst_gap", "dst_fold")
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/\-]{0,199}")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.fullmatch(value.strip().lower())):
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    else:
        raise ConfigError(f"{where} catchup_window = {value!r} is not a duration; write seconds (86400) or "
                          '"90s", "15m", "24h", "2d"')
    if not 0 < seconds <= 366 * 86400:
        raise ConfigError(f"{where} catchup_window = {value!r} must be longer than zero and at most a year")
    return seconds


def target_schedules(entries: Any, *, source: str) -> tuple[ScheduleDef, ...]:
    """Validate the ``[[schedules]]`` array of ``source`` (a file name for messages) into schedule definitions.

    Returns:
        One :class:`~oncebeat.app.ScheduleDef` per entry, task ``oncebeat.push``, the target in its args.

    Raises:
        ConfigError: a problem in an entry, e.g. ``oncebeat.toml: [[schedules]] #2 (key "overdue"): tz ...``.
    """
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{source}: schedules must be an array of tables: write each as a [[schedules]] header "
                          "followed by its keys")
    seen: dict[str, int] = {}
    out = []
    for n, entry in enumerate(entries, start=1):
        key = entry.get("key")
        where = f"{source}: [[schedules]] #{n}" + (f" (key {key!r})" if isinstance(key, str) else "")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ConfigError(f"{where}: key = {key!r} must name the schedule (letters, digits, . _ : / -), "
                              'e.g. key = "overdue-reminders"')
        if key in seen:
            raise ConfigError(f"{where}: key {key!r} is also [[schedules]] #{seen[key]}; keys must be unique")
        seen[key] = n
        for field in ("cron", "tz", "target"):
            if field not in entry:
                example = {"cron": '"0 8 * * *"', "tz": '"America/Chicago"',
                           "target": '"sidekiq:OverdueReminderJob"'}[field]
                raise ConfigError(f"{where}: {field} is missing; add e.g. {field} = {example}")
        options = {k: v for k, v in entry.items() if k not in SCHEDULE_FIELDS}
        target = parse_target(entry["target"], options, where=where)
        extra = {k: entry[k] for k in ("catchup", "overlap", "dst_gap", "dst_fold") if k in entry}
        if "catchup_window" in entry:
            extra["catchup_window"] = _seconds(entry["catchup_window"], where)
        try:
            out.append(ScheduleDef(key=key, expression=entry["cron"], tz=entry["tz"], task=PUSH_TASK,
                                   args=target.args(), **extra))
        except (ConfigError, ScheduleError, TypeError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return tuple(out)


def load_target_schedules(path: str | Path | None = None) -> tuple[ScheduleDef, ...]:
    """The ``[[schedules]]`` of the TOML file ``path`` (default ``$ONCEBEAT_CONFIG``, else ``./oncebeat.toml``,
    which may be absent: no schedules). Other sections (the reminder policy) are not read here.

    Raises:
        ConfigError: an unreadable file (not the absent default), a TOML syntax error (line and column named),
            or an invalid entry.
    """
    explicit = path is not None or bool(os.environ.get("ONCEBEAT_CONFIG"))
    file = Path(path if path is not None else os.environ.get("ONCEBEAT_CONFIG") or "oncebeat.toml")
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not explicit:
            return ()
        raise ConfigError(f"{file}: file not found; pass the path of the oncebeat.toml that holds [[schedules]]") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read it as UTF-8 text ({exc}); check the path and permissions") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: TOML syntax error: {exc}; fix the line (strings need double quotes)") from None
    return target_schedules(data.get("schedules", []), source=str(file))
