"""The ``[delivery]`` keys: how long a mail outage is waited out, the relay's rate limit and its window, and SMTP
connections per worker; each check returns the value as :class:`~oncebeat.reminders.policy.Policy` keeps it, or raises
:class:`~oncebeat.reminders.policy.problems._Invalid` with the fix.
"""

from __future__ import annotations

from typing import Any

from oncebeat.durations import format_duration
from oncebeat.reminders.policy.problems import _Invalid, _type_name
from oncebeat.reminders.policy.schedule_keys import _duration_value

#: ``[delivery] outage_retry`` bounds (seconds): an outage shorter than an hour must never fail a reminder.
MIN_OUTAGE_RETRY = 3600.0
MAX_OUTAGE_RETRY = 31 * 86400.0
#: ``[delivery] max_per_minute`` / ``max_connections`` / ``rate_window`` bounds.
MAX_PER_MINUTE = 1_000_000
MAX_SMTP_CONNECTIONS = 1024  # oncebeat.mail.smtp.MAX_CONNECTIONS
MIN_RATE_WINDOW = 1.0
MAX_RATE_WINDOW = 3600.0


def _check_outage_retry(value: Any) -> float:
    fix = 'Write a duration of at least an hour, e.g. "24h" (the default) or "2d".'
    seconds = _duration_value(value, fix)
    if seconds < MIN_OUTAGE_RETRY:
        raise _Invalid("is shorter than 1h: a mail server down, answering 4xx or refusing TLS/auth for that long "
                       "would mark every reminder due then failed for good", fix, value=value)
    if seconds > MAX_OUTAGE_RETRY:
        raise _Invalid(f"is longer than the maximum of {format_duration(MAX_OUTAGE_RETRY)}",
                       'Use at most "31d"; reminders failed after that can be retried with '
                       "`oncebeat reminders retry --failed`.", value=value)
    return seconds


def _whole_number(value: Any, low: int, high: int, fix: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"must be a whole number, got {_type_name(value)}", fix, value=value)
    if not low <= value <= high:
        raise _Invalid(f"must be from {low} to {high}", fix, value=value)
    return value


def _check_max_per_minute(value: Any) -> int | None:
    return _whole_number(value, 1, MAX_PER_MINUTE, "Write how many emails your relay accepts per minute, e.g. 60 "
                         "(counted over every worker), or remove the key for no limit.")


def _check_max_connections(value: Any) -> int | None:
    return _whole_number(value, 1, MAX_SMTP_CONNECTIONS, "Write how many connections your relay allows at once "
                         "from one worker process, e.g. 4, or remove the key (one per handler slot).")


def _check_rate_window(value: Any) -> float:
    fix = 'Write a duration from 1s to 1h, e.g. "1m" (the default).'
    seconds = _duration_value(value, fix)
    if not MIN_RATE_WINDOW <= seconds <= MAX_RATE_WINDOW:
        raise _Invalid("must be from 1s to 1h", fix, value=value)
    return seconds
