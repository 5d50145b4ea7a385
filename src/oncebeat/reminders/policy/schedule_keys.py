"""The ``[schedule]`` and ``[retention]`` keys: the scan's cron expression and zone, catch-up and overlap, and how long
engine history is kept; each check returns the value as the :class:`~oncebeat.reminders.policy.Policy` keeps it, or
raises :class:`~oncebeat.reminders.policy.problems._Invalid` with the fix.

Durations (``catchup_window``, ``older_than``, and the other sections' durations) read through
:func:`_duration_value`: seconds, or a string such as ``"24h"``.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from oncebeat.durations import format_duration, parse_duration
from oncebeat.errors import ScheduleError
from oncebeat.reminders.conversions import zone_reason
from oncebeat.reminders.policy.problems import _has_control, _Invalid, _type_name
from oncebeat.schedules import Schedule

#: Allowed values of ``[schedule] catchup`` (DESIGN.md §5).
CATCHUP_POLICIES = ("none", "latest", "all")
#: Allowed values of ``[schedule] overlap`` (oncebeat.app.OVERLAP_POLICIES).
OVERLAP_POLICIES = ("allow", "skip", "buffer_one")


#: The longest catch-up window (seconds): 31 days. A catch-up replays at most this much downtime.
MAX_CATCHUP_WINDOW = 31 * 86400.0


#: When the [retention] prune runs by default (03:30 in the [schedule] zone).
DEFAULT_RETENTION_CRON = "30 3 * * *"


def _check_retention(value: Any) -> float | None:
    fix = 'Write a duration of at least a day, e.g. "30d" or "90d" (README, "Retention").'
    if value is None:
        return None
    seconds = _duration_value(value, fix)
    if seconds < 86400:
        raise _Invalid("is shorter than a day: effect keys and the evidence of yesterday's incident would be "
                       "forgotten", fix, value=value)
    return seconds


def _check_schedule(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got "
                       f"{_type_name(value)}", 'Write a 5-field cron expression in quotes, e.g. "0 8 * * '
                                               '*".', value=value)
    text = " ".join(value.split())
    if not text:
        raise _Invalid("is empty", 'Write a 5-field cron expression, e.g. "0 8 * * *" (08:00 every day).', value=value)
    if _has_control(value.replace("\t", " ")):
        raise _Invalid("must be a single line", 'Write the cron expression on one line, e.g. "0 8 * * *".', value=value)
    try:
        Schedule(expression=text, tz="UTC")
    except ScheduleError as exc:
        raise _Invalid(str(exc), 'Write a 5-field cron expression such as "0 8 * * *" or an interval such as '
                       '"every 15m".', value=value) from exc
    return text


@lru_cache(maxsize=1)
def _all_zones() -> tuple[str, ...]:
    return tuple(sorted(available_timezones()))


def _zone_suggestions(name: str) -> list[str]:
    zones = _all_zones()
    by_lower = {z.lower(): z for z in zones}
    key = name.strip().lower().replace(" ", "_")
    found: list[str] = []
    if key in by_lower:
        found.append(by_lower[key])
    tail = key.rsplit("/", 1)[-1]
    found.extend(z for z in zones if z.lower().rsplit("/", 1)[-1] == tail)
    found.extend(by_lower[m] for m in difflib.get_close_matches(key, list(by_lower), n=3, cutoff=0.6))
    unique: list[str] = []
    for z in found:
        if z not in unique and z != name:
            unique.append(z)
    return unique[:3]


def _check_tz(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got "
                       f"{_type_name(value)}", 'Write an IANA time zone name in quotes, e.g. '
                                               '"America/Chicago".', value=value)
    if not value.strip():
        raise _Invalid("is empty", 'Write an IANA time zone name, e.g. "America/Chicago" or "UTC".', value=value)
    host_zone = zone_reason(value)
    if host_zone and "host" in host_zone:
        raise _Invalid(host_zone, 'Write the business zone itself, e.g. "America/Chicago" (G7: never the host\'s '
                                  'zone).',
                       value=value)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        close = _zone_suggestions(value)
        quoted = [json.dumps(z) for z in close]
        hint = ""
        if quoted:
            hint = "Did you mean " + (", ".join(quoted[:-1]) + " or " if len(quoted) > 1 else "") + quoted[-1] + "? "
        raise _Invalid(
            "is not a known IANA time zone",
            hint + 'Use a name from the tz database, such as "America/Chicago", "Europe/Berlin" or "UTC".',
            value=value,
        ) from None
    return value


def _check_catchup(value: Any) -> str:
    allowed = ", ".join(json.dumps(c) for c in CATCHUP_POLICIES)
    if not isinstance(value, str) or value not in CATCHUP_POLICIES:
        close = (difflib.get_close_matches(value.strip().lower(), CATCHUP_POLICIES, n=1)
                 if isinstance(value, str) else [])
        hint = f"Did you mean {json.dumps(close[0])}? " if close else ""
        raise _Invalid(f"must be one of "
                       f"{allowed}", hint + '"latest" runs only the newest missed scan after downtime '
                                            '(recommended).', value=value)
    return value


def _duration_value(value: Any, fix: str) -> float:
    """Seconds of a duration setting (a number of seconds or a string such as "24h"), else :class:`_Invalid`
    naming the problem with ``fix``; each setting then checks its own range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Invalid(f"must be a duration, got {_type_name(value)}", fix, value=value)
    try:
        return parse_duration(value)
    except ValueError:
        raise _Invalid("is not a duration", fix, value=value) from None


def _check_catchup_window(value: Any) -> float:
    fix = 'Write seconds (86400) or a duration string such as "90s", "15m", "24h", "2d".'
    seconds = _duration_value(value, fix)
    if seconds <= 0:
        raise _Invalid("must be longer than "
                       "zero", fix + ' To skip scans missed during downtime, use catchup = "none".', value=value)
    if seconds > MAX_CATCHUP_WINDOW:
        raise _Invalid(f"is longer than the maximum of {format_duration(MAX_CATCHUP_WINDOW)}",
                       "A longer window would replay more than a month of scans after downtime; use at most "
                       '"31d" (reminders missed longer ago are found by the next scan anyway).', value=value)
    return seconds


def _check_overlap(value: Any) -> str:
    if not isinstance(value, str) or value not in OVERLAP_POLICIES:
        close = (difflib.get_close_matches(value.strip().lower(), OVERLAP_POLICIES, n=1)
                 if isinstance(value, str) else [])
        hint = f"Did you mean {json.dumps(close[0])}? " if close else ""
        raise _Invalid("must be one of " + ", ".join(json.dumps(o) for o in OVERLAP_POLICIES),
                       hint + '"skip" never starts a scan while the previous one still runs.', value=value)
    return value
