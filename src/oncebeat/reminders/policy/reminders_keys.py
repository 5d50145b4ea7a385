"""The ``[reminders]`` keys of the default ladder: stages, collapse, spacing, send zone and time, templates, the
fallback locale, grouping, the per-customer cap, the payment-freshness fence and ``notify_final``; each check returns
the value as :class:`~oncebeat.reminders.policy.Policy` keeps it, or raises
:class:`~oncebeat.reminders.policy.problems._Invalid` with the fix.

:func:`scan_expression` derives the cron expression the scan fires on from ``[schedule] cron`` and ``send_zone``.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oncebeat.reminders.notices.escalation import check_notify_address
from oncebeat.reminders.policy.delivery_keys import _whole_number
from oncebeat.reminders.policy.problems import _Invalid, _type_name
from oncebeat.reminders.policy.schedule_keys import _duration_value
from oncebeat.reminders.translations import fallback_locale
from oncebeat.schedules import Schedule

#: Earliest courtesy stage: one year before the due date.
MIN_STAGE = -365
#: Latest stage: about ten years past due.
MAX_STAGE = 3650

_DEFAULT_STAGES_EXAMPLE = "[1, 7, 14, 30]"
COLLAPSE_MODES = ("next", "highest")
SEND_ZONES = ("schedule", "customer")
DEFAULT_SCHEDULE = "0 8 * * *"
QUARTER_HOURLY = "*/15 * * * *"
_SEND_AT = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")


def scan_expression(schedule: str, send_zone: str) -> str:
    """The scan's cron expression for the written ``schedule`` (``[schedule] cron``) and ``send_zone``.

    With ``send_zone = "customer"`` the default daily ``0 8 * * *`` (what ``oncebeat init`` writes) becomes
    :data:`QUARTER_HOURLY`, so every customer's zone reaches its ``send_at``; any other expression is kept (and
    must fire at every quarter hour, which :class:`Policy` checks). The one place this is derived.
    """
    return QUARTER_HOURLY if send_zone == "customer" and schedule == DEFAULT_SCHEDULE else schedule


def _check_send_zone(value: Any) -> str:
    if not isinstance(value, str) or value not in SEND_ZONES:
        raise _Invalid("is not a send zone",
                       'Write send_zone = "schedule" (every customer on the schedule\'s calendar) or "customer" '
                       "(each customer at send_at on their own calendar, from customer_tz).", value=value)
    return value


def _check_send_at(value: Any) -> str:
    if not isinstance(value, str) or not _SEND_AT.fullmatch(value.strip()):
        raise _Invalid("is not a local time of day", 'Write send_at = "08:00" (24-hour HH:MM).', value=value)
    return value.strip()


def _fires_every_quarter_hour(expression: str) -> bool:
    """Whether ``expression`` (in UTC) fires at each of the 96 quarter hours of a day."""
    sched = Schedule(expression=expression, tz="UTC")
    start = datetime(2026, 1, 5, tzinfo=UTC)
    quarters = {start + timedelta(minutes=15 * i) for i in range(96)}
    fired = set(sched.between(start - timedelta(seconds=1), start + timedelta(days=1) - timedelta(seconds=1)))
    return quarters <= fired


def _check_collapse(value: Any) -> str:
    if not isinstance(value, str) or value not in COLLAPSE_MODES:
        raise _Invalid(
            "is not a collapse mode",
            'Write collapse = "next" (send the lowest unsent stage, then continue the ladder) or '
            '"highest" (send only the highest due stage, skip the lower ones).',
            value=value)
    return value


def _check_stages(value: Any) -> tuple[int, ...]:
    fix_order = f"List each stage once in ascending order, e.g. {_DEFAULT_STAGES_EXAMPLE}."
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise _Invalid(f"must be an array of whole days, got "
                       f"{_type_name(value)}", f"Write e.g. stages = {_DEFAULT_STAGES_EXAMPLE}.", value=value)
    items = list(value)
    if not items:
        raise _Invalid("is empty: no reminder would ever be "
                       "sent", f"Give at least one stage, e.g. {_DEFAULT_STAGES_EXAMPLE}.", value=value)
    for i, day in enumerate(items):
        if isinstance(day, bool) or not isinstance(day, int):
            raise _Invalid(
                f"must be a whole number of days, got {_type_name(day)}",
                "Write days as integers without quotes: 7 means 7 days past due, -3 means 3 days before the due date.",
                index=i,
                value=day,
            )
        if not MIN_STAGE <= day <= MAX_STAGE:
            raise _Invalid(
                f"is out of range: stages are days between {MIN_STAGE} and {MAX_STAGE}",
                "Use negative days (at most a year) for courtesy notes before the due date and positive days past due.",
                index=i,
                value=day,
            )
        if i > 0:
            prev = items[i - 1]
            if day == prev:
                raise _Invalid(f"repeats stage {prev} (stages[{i - 1}])", fix_order, index=i, value=day)
            if day < prev:
                raise _Invalid(f"is smaller than stages[{i - 1}] = {prev}: stages must be strictly "
                               "increasing", fix_order, index=i, value=day)
    return tuple(items)


def _check_templates(value: Any) -> Path | None:
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise _Invalid("is empty", 'Remove the key to use the built-in templates, or name a folder, e.g. '
                                       '"templates".', value=value)
        return Path(value)
    if isinstance(value, os.PathLike):
        return Path(value)
    raise _Invalid(f"must be a folder path string, got "
                   f"{_type_name(value)}", 'Write e.g. templates = "templates".', value=value)


def _check_fallback_locale(value: Any) -> str:
    fix = ('Write a locale of a language the emails ship in (English, German, French, Spanish), e.g. '
           'fallback_locale = "en_US" or "de_DE".')
    if not isinstance(value, str):
        raise _Invalid(f"must be a locale string, got {_type_name(value)}", fix, value=value)
    try:
        return str(fallback_locale(value).locale)
    except ValueError as exc:
        raise _Invalid(str(exc), fix, value=value) from None


def _check_spacing(value: Any) -> str:
    if not isinstance(value, str) or value not in ("from_sent", "nominal"):
        raise _Invalid("is not a spacing", 'Write spacing = "from_sent" (after a late stage the next keeps its gap '
                       'from the actual send) or "nominal" (each stage on due date + its days).', value=value)
    return value


MAX_NOTICES_PER_WEEK = 100
MIN_PAYMENT_STALENESS = 60.0
MAX_PAYMENT_STALENESS = 31 * 86400.0


def _check_max_notices_per_week(value: Any) -> int | None:
    return _whole_number(value, 1, MAX_NOTICES_PER_WEEK, "Write how many notices one customer may get in any 7 "
                         "days over all their invoices, e.g. 2, or remove the key for no cap.")


def _check_max_payment_staleness(value: Any) -> float | None:
    if value is None:
        return None
    fix = 'Write a duration from 1m to 31d, e.g. "6h", or remove the key to send whatever the data\'s age.'
    seconds = _duration_value(value, fix)
    if not MIN_PAYMENT_STALENESS <= seconds <= MAX_PAYMENT_STALENESS:
        if isinstance(value, int | float):  # a bare number is seconds: 6 meant as hours would be 6 s
            raise _Invalid(f"is a bare number, read as {value:g} seconds: it must be from 1m to 31d",
                           f'Write the duration with its unit in quotes, e.g. "{value:g}h" for {value:g} hours or '
                           f'"{value:g}m" for minutes, or remove the key to send whatever the data\'s age.',
                           value=value)
        raise _Invalid("must be from 1m to 31d", fix, value=value)
    return seconds


#: ``group``: one email per (invoice, stage) (``none``) or one notice per customer and business date (``customer``).
GROUPS = ("none", "customer")


def _check_group(value: Any) -> str:
    if not isinstance(value, str) or value not in GROUPS:
        raise _Invalid("is not a grouping", 'Write group = "customer" (one notice per customer and business date, '
                       'listing every invoice due that day) or "none" (one email per invoice and stage).', value=value)
    return value


def _check_notify_final(value: Any) -> str | None:
    try:
        return check_notify_address(value)
    except ValueError as exc:
        raise _Invalid(str(exc).rstrip("."), "It is the internal address told when a final stage went out.",
                       value=value) from None
