"""Jinja filters of the dashboard: instants in local time and UTC, durations, money, JSON.

Every instant is shown twice where it matters (local time in the schedule's zone, and UTC),
because an operator reads local time and the database stores UTC.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jinja2 import Environment, pass_context
from jinja2.runtime import Context

from ..doctor.model import duration_text
from ..durations import format_duration
from ..reminders.render import format_money

__all__ = ["ago", "install", "local", "utc"]


def _zone(tz: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(tz or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def utc(value: datetime | None) -> str:
    """``2026-03-08 14:00:00Z`` (empty for None)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@pass_context
def instant(ctx: Context, value: datetime | None) -> str:
    """An instant in the zone the operator picked (the page's ``display_zone``; the ``utc`` filter of templates):
    ``2026-03-08 14:00:00Z`` in UTC (the default), ``2026-03-08 08:00:00 CST`` in the schedule's zone. Whole
    seconds: operators read seconds, and a triggered fire's microseconds are noise."""
    zone = ctx.get("display_zone")
    if value is None or not zone:
        return utc(value)
    t = value.astimezone(_zone(zone))
    return f"{t.strftime('%Y-%m-%d %H:%M:%S')} {t.tzname()}"


def local(value: datetime | None, tz: str | None = None) -> str:
    """``2026-03-08 08:00:00 CST (-06:00)`` in zone ``tz`` (empty for None)."""
    if value is None:
        return ""
    t = value.astimezone(_zone(tz))
    offset = t.strftime("%z")
    return f"{t.strftime('%Y-%m-%d %H:%M:%S')} {t.tzname()} ({offset[:3]}:{offset[3:]})"


def ago(value: datetime | None, now: datetime) -> str:
    """``3 min ago`` / ``in 2 h`` relative to ``now`` (empty for None)."""
    if value is None:
        return ""
    seconds = (now - value).total_seconds()
    return f"{duration_text(seconds)} ago" if seconds >= 0 else f"in {duration_text(-seconds)}"


_FRACTION = re.compile(r"(\d{2}:\d{2}:\d{2})\.\d+")


def whole_seconds(value: str | None) -> str:
    """An ISO instant's text without its fraction of a second (``08:00:00.123456-06:00`` → ``08:00:00-06:00``):
    operators read seconds, and a triggered fire's microseconds are noise."""
    return _FRACTION.sub(r"\1", value or "")


def seconds(value: timedelta | float | None) -> str:
    if value is None:
        return ""
    return duration_text(value.total_seconds() if isinstance(value, timedelta) else float(value))


def money(amount_minor: float | None, currency: str) -> str:
    return format_money(int(amount_minor or 0), currency, "en_US")


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str, ensure_ascii=False, sort_keys=True)


def install(env: Environment) -> None:
    """Register the filters on ``env``."""
    env.filters.update(utc=instant, local=local, ago=ago, seconds=seconds, money=money, pretty=to_json,
                       duration=format_duration, whole_seconds=whole_seconds)
