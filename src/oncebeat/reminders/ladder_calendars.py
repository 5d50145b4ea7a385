"""The business calendar and the per-customer cap an invoice follows: its pinned ladder version's, else the policy's.

A ``[[ladders]]`` table may carry its own ``calendar = { ... }`` (the keys and checks of ``[calendar]``) and
``max_notices_per_week``; a ladder that does not name them (and the ``default`` ladder) follows the policy-wide
``[calendar]`` and ``[reminders] max_notices_per_week`` of the running file. Everything that reads a calendar or a
cap for an invoice (the scan's stage dates and cutoffs, the pin's nominal dates, the send window, the next business
day of a deferral, the preview, the invoice story, the simulator's checker) goes through :func:`ladder_calendar`
and :func:`ladder_cap` with the invoice's pinned version, so one rule decides.

The cap counts a customer's notices across ALL their ladders; the limit applied is that of the ladder of the
notice being placed. A customer with an invoice on a ladder capped at 1 and another on a ladder capped at 3 thus
gets the second ladder's notice while fewer than 3 went out in the week, and the first ladder's only when none did.

Example::

    cal = ladder_calendar(policy, version.settings)   # the ladder's own, else policy.calendar (None: every day)
    cap = ladder_cap(policy, version.settings)        # the ladder's own, else policy.max_notices_per_week
"""

from __future__ import annotations

from .calendar import BusinessCalendar
from .ladders import LadderSettings
from .policy import Policy

__all__ = ["calendar_or", "cap_or", "describe_days", "ladder_calendar", "ladder_cap"]


def ladder_calendar(policy: Policy, settings: LadderSettings | None) -> BusinessCalendar | None:
    """The business calendar of a ladder version's ``settings``: its own, else ``policy.calendar`` (None: every
    day is a business day). ``settings`` None (a reminder from before ladders were recorded): the policy's."""
    return calendar_or(settings, policy.calendar)


def ladder_cap(policy: Policy, settings: LadderSettings | None) -> int | None:
    """Notices per customer in any 7 days allowed when placing a notice of this ladder version: its own
    ``max_notices_per_week``, else the policy's (None: no cap)."""
    return cap_or(settings, policy.max_notices_per_week)


def calendar_or(settings: LadderSettings | None, default: BusinessCalendar | None) -> BusinessCalendar | None:
    """:func:`ladder_calendar` with the policy-wide calendar given as ``default`` (the simulator's checker)."""
    if settings is not None and settings.calendar is not None:
        return settings.calendar
    return default


def cap_or(settings: LadderSettings | None, default: int | None) -> int | None:
    """:func:`ladder_cap` with the policy-wide cap given as ``default`` (the simulator's checker)."""
    if settings is not None and settings.max_notices_per_week is not None:
        return settings.max_notices_per_week
    return default


def describe_days(policy: Policy, settings: LadderSettings) -> str:
    """One line on the calendar and cap a ladder follows and whose they are, e.g. "calendar DE-BY holidays,
    weekend Sat+Sun, stage days: business (its own); cap 1 notice per customer in 7 days (its own)"."""
    calendar = ladder_calendar(policy, settings)
    whose = "its own" if settings.calendar is not None else "[calendar]"
    days = f"calendar {calendar.describe()} ({whose})" if calendar is not None else "every day a business day"
    cap = ladder_cap(policy, settings)
    whose = "its own" if settings.max_notices_per_week is not None else "[reminders]"
    limit = (f"cap {cap} notice{'s' if cap != 1 else ''} per customer in 7 days ({whose})" if cap is not None
             else "no cap")
    return f"{days}; {limit}"
