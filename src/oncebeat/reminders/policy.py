"""The reminder policy: when the scan runs and which reminders it sends.

The policy lives in one TOML file, ``oncebeat.toml`` (DESIGN.md §6, §7)::

    [schedule]
    cron = "0 8 * * *"           # 5-field cron expression of the scan
    tz = "America/Chicago"       # business zone: cron and "days past due" use it
    catchup = "latest"           # none | latest | all
    catchup_window = "24h"       # seconds, or "90s", "15m", "24h", "2d", "1h30m"
    overlap = "allow"            # allow | skip | buffer_one: may a scan start while the previous one runs?

    [reminders]
    stages = [1, 7, 14, 30]      # days relative to the due date (negative = before)
    collapse = "next"            # next | highest: several stages due at once (after downtime, a late import)
    send_zone = "schedule"       # schedule | customer: "customer" sends at send_at on each customer's calendar
    send_at = "08:00"            # local send time with send_zone = "customer" (the scan then runs every 15 min)
    templates = "templates"      # optional; relative to the folder of the file
    fallback_locale = "en_US"    # emails to customers whose language has no catalog (ja, ar, pt…): words and formats

    [sender]
    from = "Billing <billing@example.com>"
    reply_to = "accounts@example.com"   # optional
    company = "Example Co"

    [delivery]
    outage_retry = "24h"         # how long a mail outage is waited out before a reminder is failed (>= 1h)
    max_per_minute = 60          # optional: sends to the relay in any minute, over every worker (the database)
    rate_window = "1m"           # optional: the window max_per_minute counts over (1s to 1h; default 1 minute)
    max_connections = 4          # optional: SMTP connections per worker process (default: its --concurrency)

``[[ladders]]`` tables add ladders for some invoices (matched by rules, pinned per invoice):
:mod:`oncebeat.reminders.ladders`; the settings above are the ``default`` ladder.

Every key is optional: a missing key keeps its default, and a missing file
(or no file at all) gives :class:`Policy` with all defaults. Unknown keys are
refused, so a typo such as ``timezone = ...`` cannot silently fall back to a
default. Every problem is reported as a :class:`~oncebeat.errors.ConfigError`
whose message names the file, the TOML key path (e.g. ``[reminders]
stages[2]``) and the fix; several problems in one file are reported together.

The cron expression is only checked to be a non-empty single line here: the
schedule layer parses it (and reports its own errors) when the clock starts.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from functools import lru_cache
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from oncebeat.app import ScheduleDef
from oncebeat.durations import format_duration, parse_duration
from oncebeat.errors import ConfigError, ScheduleError
from oncebeat.reminders.calendar import BusinessCalendar, calendar_config
from oncebeat.reminders.conversions import zone_reason
from oncebeat.reminders.notices.attachments import AttachmentPolicy, attachments_config
from oncebeat.reminders.notices.escalation import check_notify_address, escalation_config, stage_problems
from oncebeat.reminders.sources.database import SourceConfig, source_config
from oncebeat.reminders.translations import DEFAULT_FALLBACK_LOCALE, fallback_locale
from oncebeat.schedules import Schedule
from oncebeat.targets.config import target_schedules

__all__ = [
    "CATCHUP_POLICIES",
    "DEFAULT_CONFIG_NAME",
    "MAX_STAGE",
    "MIN_STAGE",
    "Policy",
    "default_toml",
    "format_duration",
    "load_policy",
    "parse_duration",
    "policy_from_dict",
    "scan_expression",
    "stage_label",
    "stages_due",
    "write_default_config",
]

#: File name ``load_policy(None)`` looks for in the working directory.
DEFAULT_CONFIG_NAME = "oncebeat.toml"
#: Allowed values of ``[schedule] catchup`` (DESIGN.md §5).
CATCHUP_POLICIES = ("none", "latest", "all")
#: Allowed values of ``[schedule] overlap`` (oncebeat.app.OVERLAP_POLICIES).
OVERLAP_POLICIES = ("allow", "skip", "buffer_one")
#: Earliest courtesy stage: one year before the due date.
MIN_STAGE = -365
#: The longest catch-up window (seconds): 31 days. A catch-up replays at most this much downtime.
MAX_CATCHUP_WINDOW = 31 * 86400.0
#: Latest stage: about ten years past due.
MAX_STAGE = 3650
#: ``[delivery] outage_retry`` bounds (seconds): an outage shorter than an hour must never fail a reminder.
MIN_OUTAGE_RETRY = 3600.0
MAX_OUTAGE_RETRY = 31 * 86400.0
#: ``[delivery] max_per_minute`` / ``max_connections`` / ``rate_window`` bounds.
MAX_PER_MINUTE = 1_000_000
MAX_SMTP_CONNECTIONS = 1024  # oncebeat.mail.smtp.MAX_CONNECTIONS
MIN_RATE_WINDOW = 1.0
MAX_RATE_WINDOW = 3600.0

_DEFAULT_STAGES_EXAMPLE = "[1, 7, 14, 30]"


class _Invalid(Exception):
    """One validation problem of one value; wrapped into ConfigError by the caller."""

    def __init__(self, problem: str, fix: str, *, index: int | None = None, value: Any = None, show_value: bool = True):
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.index = index
        self.value = value
        self.show_value = show_value


# --------------------------------------------------------------------------- the value


#: When the [retention] prune runs by default (03:30 in the [schedule] zone).
DEFAULT_RETENTION_CRON = "30 3 * * *"


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """The validated reminder policy.

    Building a ``Policy`` directly validates it too (raising ``ConfigError``
    naming the field); ``stages`` may be given as any iterable of ints,
    ``templates`` as a string and ``catchup_window`` as a duration string.
    """

    schedule: str = "0 8 * * *"  # cron as written; the scan fires on scan_schedule (quarter-hourly for "customer")
    tz: str = "America/Chicago"  # business zone: days past due are counted in it
    catchup: str = "latest"  # none | latest | all
    catchup_window: float = 86400.0  # seconds
    overlap: str = "allow"  # allow | skip | buffer_one: whether a scan may start while the previous one runs
    stages: tuple[int, ...] = (1, 7, 14, 30)  # days relative to the due date, strictly increasing
    collapse: str = "next"  # next | highest: which stage goes out when several became due at once
    spacing: str = "from_sent"  # from_sent | nominal: after a late stage, is the next one spaced from it?
    send_zone: str = "schedule"  # schedule | customer: whose calendar decides the business date
    send_at: str = "08:00"  # local send time (HH:MM) when send_zone = "customer"
    sender: str = "Billing <billing@example.com>"  # From
    reply_to: str | None = None
    templates: Path | None = None  # folder overriding built-in templates
    fallback_locale: str = DEFAULT_FALLBACK_LOCALE  # locale of emails whose customer's language has no catalog
    company: str = "Example Co"  # shown in emails
    outage_retry: float = 86400.0  # seconds a mail outage (connect, TLS, auth, 4xx) is waited out per reminder
    max_per_minute: int | None = None  # sends to the relay per rate_window over every worker; None: no limit
    rate_window: float = 60.0  # seconds: the sliding window max_per_minute counts over
    max_connections: int | None = None  # SMTP connections per worker process; None: one per handler slot
    retention: float | None = None  # seconds of engine history kept by the daily prune; None: never pruned
    retention_cron: str = DEFAULT_RETENTION_CRON  # when the prune runs, in the [schedule] zone
    # [[schedules]]: schedules pushed to the team's own workers (oncebeat.targets), validated by that module
    schedules: tuple[ScheduleDef, ...] = ()
    # [source]: the team's own database, read before each scan (oncebeat.reminders.sources.database)
    source: SourceConfig | None = None
    # --- issue 23 items 4-5 (oncebeat.reminders.capfence): the per-customer cap and the payment-freshness fence.
    max_notices_per_week: int | None = None  # notices per customer in any 7 days, over all invoices; None: no cap
    max_payment_staleness: float | None = None  # seconds: sends wait while payment data is older; None: no fence
    # --- [calendar] (issue 23.3): business days, stage day counting, send window (oncebeat.reminders.calendar);
    # None: every day is a business day. Checked by its own module; the one cross-field check is below.
    calendar: BusinessCalendar | None = None
    # [[ladders]]: named ladders chosen per invoice by rules (oncebeat.reminders.ladders); the rest is "default"
    ladders: tuple[Any, ...] = ()
    # [attachments]: the invoice PDF and a statement per stage (oncebeat.reminders.notices.attachments)
    attachments: AttachmentPolicy | None = None
    # group (issue 24 item 1, oncebeat.reminders.notices.grouping): "customer" sends one notice per customer and
    # business date listing every invoice due that day; "none" one email per invoice and stage
    group: str = "none"
    # [stage.N] tables: CC, BCC and a late fee per stage of the default ladder; [reminders] notify_final: the
    # internal address told when a final stage went out (oncebeat.reminders.notices.escalation, issue 24.4)
    escalation: tuple[Any, ...] = ()
    notify_final: str | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        for f in fields(self):
            check = _CHECKS[f.name]
            try:
                value = check(getattr(self, f.name))
            except _Invalid as inv:
                problems.append(_describe(f.name, inv))
            else:
                object.__setattr__(self, f.name, value)
        if not problems and self.send_zone == "customer":
            if not _fires_every_quarter_hour(self.scan_schedule):
                problems.append(_describe("schedule", _Invalid(
                    'must fire at every quarter hour with send_zone = "customer" (zones such as Asia/Kolkata and '
                    "Asia/Kathmandu reach their send time at :30 and :45 UTC)",
                    f'Write cron = "{QUARTER_HOURLY}", or leave cron unset.', value=self.schedule)))
        if not problems and self.calendar is not None and self.calendar.send_window is not None \
                and self.send_zone == "customer":
            opens, closes = self.calendar.send_window
            if not opens <= self.send_time < closes:
                problems.append(_describe("send_at", _Invalid(
                    f"is outside [calendar] send_window ({opens:%H:%M}-{closes:%H:%M}): every reminder would wait "
                    "for the next day's window", "Move send_at into the window, or widen send_window.",
                    value=self.send_at)))
        if not problems and self.retention is None and self.retention_cron != DEFAULT_RETENTION_CRON:
            problems.append(_describe("[retention] cron", _Invalid(
                "is set, but [retention] older_than is not, so nothing would ever be pruned",
                'Add older_than = "90d" (at least a day) to [retention], or remove cron.', value=self.retention_cron)))
        if not problems and self.attachments is not None and isinstance(self.attachments.statement, tuple) \
                and set(self.attachments.statement) - set(self.stages):
            problems.append(_describe("[attachments] statement", _Invalid(
                f"names a stage the ladder {list(self.stages)} does not have",
                "List stages of [reminders] stages, or write statement = \"final\" or \"always\".",
                value=list(self.attachments.statement))))
        if not problems:
            problems += _escalation_stage_problems(self) + _ladder_window_problems(self)
        if problems:
            raise _config_error("Policy", problems)

    @property
    def scan_schedule(self) -> str:
        """The cron expression the scan fires on: :func:`scan_expression` of ``schedule`` and ``send_zone``.

        ``schedule`` keeps what the file says; this is the definition the clock records and the doctor compares
        the database with (both through :func:`~oncebeat.reminders.tasks.build_app`).
        """
        return scan_expression(self.schedule, self.send_zone)

    @property
    def zone(self) -> ZoneInfo:
        """The business zone as a ``ZoneInfo``."""
        return ZoneInfo(self.tz)

    @property
    def send_time(self) -> dtime:
        """``send_at`` as a ``datetime.time`` (local wall time in the customer's zone)."""
        hour, minute = self.send_at.split(":")
        return dtime(int(hour), int(minute))

    def business_date(self, fire_at: datetime, customer_tz: str | None, schedule_date: date) -> date:
        """The business date of one customer's invoices for a scan of the occurrence at ``fire_at`` (UTC).

        ``send_zone = "schedule"``: ``schedule_date``, the occurrence's local date in the schedule's zone (G7).
        ``send_zone = "customer"``: the latest local date, in the customer's zone (the schedule's zone when the
        customer has none), whose ``send_at`` has come at ``fire_at``: before 08:00 local it is yesterday.
        Computed from the occurrence's instant, never from when the scan ran, so a late or repeated scan of
        one occurrence decides the same dates.
        """
        if self.send_zone != "customer":
            return schedule_date
        local = fire_at.astimezone(ZoneInfo(customer_tz or self.tz))
        return local.date() if local.time() >= self.send_time else local.date() - timedelta(days=1)


# --------------------------------------------------------------------------- durations

# --------------------------------------------------------------------------- field checks


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in text)


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


_ADDR = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[^\s@<>()\[\],;:\"\\]+")
_NAME_ADDR = re.compile(r"(?P<name>[^<>]*?)\s*<(?P<addr>[^<>]*)>")


def _valid_addr(addr: str) -> bool:
    if not _ADDR.fullmatch(addr):
        return False
    local, domain = addr.rsplit("@", 1)
    if local.startswith(".") or local.endswith(".") or ".." in local:
        return False
    labels = domain.split(".")
    return all(labels) and not any(lbl.startswith("-") or lbl.endswith("-") for lbl in labels)


def _check_address(value: Any, *, optional: bool) -> str | None:
    fix = 'Write one address, e.g. "billing@example.com" or "Billing <billing@example.com>".'
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got {_type_name(value)}", fix, value=value)
    text = value.strip()
    if not text:
        if optional:
            return None
        raise _Invalid("is empty", fix, value=value)
    if _has_control(text):
        raise _Invalid("contains a line break or control "
                       "character", "Write the address on one line. " + fix, value=value)
    m = _NAME_ADDR.fullmatch(text)
    addr = m.group("addr").strip() if m else text
    if not _valid_addr(addr):
        raise _Invalid("is not a valid email address", fix, value=value)
    return text


def _check_sender(value: Any) -> str:
    result = _check_address(value, optional=False)
    assert result is not None
    return result


def _check_reply_to(value: Any) -> str | None:
    return _check_address(value, optional=True)


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


def _check_company(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got "
                       f"{_type_name(value)}", 'Write your company name in quotes, e.g. "Example Co".', value=value)
    if _has_control(value):
        raise _Invalid("contains a line break or control character", "Write the company name on one line.", value=value)
    text = " ".join(value.split())
    if not text:
        raise _Invalid("is empty", 'Write the company name shown in emails, e.g. "Example Co".', value=value)
    return text


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


def _check_spacing(value: Any) -> str:
    if not isinstance(value, str) or value not in ("from_sent", "nominal"):
        raise _Invalid("is not a spacing", 'Write spacing = "from_sent" (after a late stage the next keeps its gap '
                       'from the actual send) or "nominal" (each stage on due date + its days).', value=value)
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


_CHECKS = {
    "spacing": _check_spacing,
    "ladders": _check_ladders,
    "schedule": _check_schedule,
    "tz": _check_tz,
    "catchup": _check_catchup,
    "catchup_window": _check_catchup_window,
    "overlap": _check_overlap,
    "stages": _check_stages,
    "collapse": _check_collapse,
    "send_zone": _check_send_zone,
    "send_at": _check_send_at,
    "sender": _check_sender,
    "reply_to": _check_reply_to,
    "templates": _check_templates,
    "fallback_locale": _check_fallback_locale,
    "company": _check_company,
    "outage_retry": _check_outage_retry,
    "max_per_minute": _check_max_per_minute,
    "rate_window": _check_rate_window,
    "max_connections": _check_max_connections,
    "retention": _check_retention,
    "retention_cron": _check_schedule,
    "schedules": _check_target_schedules,
    "source": _check_source,
    "calendar": _check_calendar,
    "attachments": _check_attachments,
}


# --- issue 23 items 4-5: the per-customer cap and the payment-freshness fence ([reminders] keys) -----------------
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


def _check_escalation(value: Any) -> tuple[Any, ...]:
    found, problems = escalation_config(value, where=lambda k: f"[stage.{k}]")
    if problems:
        raise _Invalid("; ".join(p.rstrip(".") for p in problems), "See README, \"Escalation and fees\"",
                       show_value=False)
    return found


def _check_notify_final(value: Any) -> str | None:
    try:
        return check_notify_address(value)
    except ValueError as exc:
        raise _Invalid(str(exc).rstrip("."), "It is the internal address told when a final stage went out.",
                       value=value) from None


def _ladder_window_problems(policy: Policy) -> list[str]:
    """With send_zone = "customer": each ladder whose send_at (its own or the default's) is outside the send
    window of its calendar (its own or [calendar]'s), as the same check of the top-level settings."""
    if policy.send_zone != "customer":
        return []
    out = []
    for n, d in enumerate(policy.ladders, start=1):
        own = dict(d.overrides)
        calendar = own.get("calendar", policy.calendar)
        if calendar is None or calendar.send_window is None or ("calendar" not in own and "send_at" not in own):
            continue  # nothing of its own: the top-level check covers it
        send_at = own.get("send_at", policy.send_at)
        hour, minute = send_at.split(":")
        opens, closes = calendar.send_window
        if not opens <= dtime(int(hour), int(minute)) < closes:
            out.append(_describe(f"[[ladders]][{n}] ({d.name}) send_at", _Invalid(
                f"is outside its calendar's send_window ({opens:%H:%M}-{closes:%H:%M}): every reminder would wait "
                "for the next day's window", "Move the ladder's send_at into the window, or widen send_window.",
                value=send_at)))
    return out


def _escalation_stage_problems(policy: Policy) -> list[str]:
    """Each stage table naming a stage its ladder does not have (the default ladder's and each [[ladders]]'s)."""
    out = stage_problems(policy.escalation, policy.stages, where=lambda k: f"[stage.{k}]", ladder="[reminders]")
    for n, d in enumerate(policy.ladders, start=1):
        own = dict(d.overrides)
        if "escalation" in own:
            prefix = f"[[ladders]][{n}] ({d.name}) stage."
            out += stage_problems(own["escalation"], own.get("stages", policy.stages), ladder="its ladder's",
                                  where=prefix.__add__)
    return out


_CHECKS["escalation"] = _check_escalation
_CHECKS["notify_final"] = _check_notify_final
_CHECKS["max_notices_per_week"] = _check_max_notices_per_week
_CHECKS["max_payment_staleness"] = _check_max_payment_staleness

#: ``group``: one email per (invoice, stage) (``none``) or one notice per customer and business date (``customer``).
GROUPS = ("none", "customer")


def _check_group(value: Any) -> str:
    if not isinstance(value, str) or value not in GROUPS:
        raise _Invalid("is not a grouping", 'Write group = "customer" (one notice per customer and business date, '
                       'listing every invoice due that day) or "none" (one email per invoice and stage).', value=value)
    return value


_CHECKS["group"] = _check_group


# --------------------------------------------------------------------------- TOML layout

# section -> {toml key -> Policy field}
_LAYOUT: dict[str, dict[str, str]] = {
    "schedule": {"cron": "schedule", "tz": "tz", "catchup": "catchup", "catchup_window": "catchup_window",
                 "overlap": "overlap"},
    "reminders": {"stages": "stages", "collapse": "collapse", "spacing": "spacing", "send_zone": "send_zone",
                  "send_at": "send_at", "templates": "templates", "fallback_locale": "fallback_locale"},
    "sender": {"from": "sender", "reply_to": "reply_to", "company": "company"},
    "delivery": {"outage_retry": "outage_retry", "max_per_minute": "max_per_minute", "rate_window": "rate_window",
                 "max_connections": "max_connections"},
    "retention": {"older_than": "retention", "cron": "retention_cron"},
}
# issue 23 items 4-5 (oncebeat.reminders.capfence)
_LAYOUT["reminders"] |= {"group": "group", "max_notices_per_week": "max_notices_per_week",
                         "max_payment_staleness": "max_payment_staleness"}
_LAYOUT["reminders"] |= {"notify_final": "notify_final"}  # issue 24.4 (oncebeat.reminders.notices.escalation)


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(where: str, inv: _Invalid) -> str:
    if inv.index is not None:
        where = f"{where}[{inv.index}]"
    shown = f" = {_show(inv.value)}" if inv.show_value else ""
    return f"{where}{shown} {inv.problem}. {inv.fix}"


def _config_error(source: str, problems: list[str]) -> ConfigError:
    if len(problems) == 1:
        return ConfigError(f"{source}: {problems[0]}")
    listing = "\n".join(f"  - {p}" for p in problems)
    return ConfigError(f"{source}: {len(problems)} problems:\n{listing}")


def _unknown_key(where: str, key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{where} is not a known key.{hint} Allowed keys: {', '.join(allowed)}."


def policy_from_dict(data: dict[str, Any], source: str = "<dict>", *, base_dir: Path | None = None,
                     text: str | None = None) -> Policy:
    """Validate parsed TOML data (``{"schedule": {...}, ...}``) into a :class:`Policy`.

    ``source`` names the origin in error messages. A relative ``templates``
    folder is resolved against ``base_dir`` when given (``load_policy`` passes
    the folder of the file) and must then exist. ``text``: the file's text, for the line numbers of
    ``[[ladders]]`` problems.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a table of sections, got {_type_name(data)}")
    problems: list[str] = []
    values: dict[str, Any] = {}
    sections = [*_LAYOUT, "source", "calendar", "attachments", "stage"]
    for section, content in data.items():
        if section == "schedules":  # [[schedules]]: the engine's target schedules, checked by their own module
            try:
                values["schedules"] = target_schedules(content, source=source)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "ladders":  # [[ladders]]: named ladders, checked by their own module
            from oncebeat.reminders.ladders import ladder_defs  # builds on this module: imported when used

            try:
                values["ladders"] = ladder_defs(content, source=source, base_dir=base_dir, text=text)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "source":  # [source]: the team's own database, checked by its own module
            try:
                values["source"] = source_config(content, source=source)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "calendar":  # [calendar]: business days and the send window, checked by its own module
            try:
                values["calendar"] = calendar_config(content, source=source)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "attachments":  # [attachments]: the invoice PDF and statements, checked by their own module
            try:
                values["attachments"] = attachments_config(content, source=source, base_dir=base_dir)
            except ConfigError as exc:
                problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if section == "stage":  # [stage.N]: escalation per stage, checked by its own module
            found, bad = escalation_config(content, where=lambda k: f"[stage.{k}]")
            problems += bad
            values["escalation"] = found
            continue
        if section not in _LAYOUT:
            if section in {k for keys in _LAYOUT.values() for k in keys}:
                owner = next(s for s, keys in _LAYOUT.items() if section in keys)
                problems.append(f"{section} must be inside the [{owner}] section. Move the line below a [{owner}] "
                                "header.")
            else:
                close = difflib.get_close_matches(section, sections, n=1)
                hint = f" Did you mean [{close[0]}]?" if close else ""
                allowed_sections = ", ".join(f"[{s}]" for s in sections)
                problems.append(f"[{section}] is not a known section.{hint} Allowed sections: {allowed_sections}.")
            continue
        if not isinstance(content, dict):
            problems.append(f"{section} = {_show(content)} must be a table. Write it as a [{section}] section header "
                            "followed by its keys.")
            continue
        allowed = _LAYOUT[section]
        for key, raw in content.items():
            where = f"[{section}] {key}"
            if key not in allowed:
                problems.append(_unknown_key(where, key, list(allowed)))
                continue
            name = allowed[key]
            try:
                value = _CHECKS[name](raw)
            except _Invalid as inv:
                problems.append(_describe(where, inv))
                continue
            if name == "templates" and isinstance(value, Path):
                value = value.expanduser()
                if base_dir is not None:
                    if not value.is_absolute():
                        value = Path(base_dir).absolute() / value
                    if not value.is_dir():
                        problems.append(
                            f"{where} = {_show(raw)}: folder {str(value)!r} does not exist. "
                            "Create it (run `oncebeat init` for examples) or remove the key to use the built-in "
                            "templates."
                        )
                        continue
            values[name] = value
    if problems:
        raise _config_error(source, problems)
    try:
        return Policy(**values)
    except ConfigError as exc:  # a check across sections: named by the file, as the others are
        raise ConfigError(f"{source}: {str(exc).removeprefix('Policy: ')}") from None


def _syntax_error(path: Path, text: str, exc: tomllib.TOMLDecodeError) -> ConfigError:
    message = str(exc)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
    if m:
        line, column = int(m.group(1)), int(m.group(2))
        message = message[: m.start()]
    else:
        message = re.sub(r"\s*\(at end of document\)\s*$", "", message) + " at end of file"
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
    return ConfigError(f"{path}:{line}:{column}: TOML syntax error: {message}. Fix the line (strings need double "
                       "quotes, e.g. tz = \"UTC\").")


def load_policy(path: Path | None) -> Policy:
    """Read the policy from a TOML file.

    ``None`` means ``./oncebeat.toml``. When that default file does not
    exist, the defaults are returned; any other missing file is an error.
    """
    default = path is None or Path(path) == Path(DEFAULT_CONFIG_NAME)
    path = Path(DEFAULT_CONFIG_NAME) if path is None else Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if default:
            return Policy()
        raise ConfigError(f"{path}: file not found. Create it with `oncebeat init` or pass the right path.") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML file. Pass the path of oncebeat.toml.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror or exc}). Check the path and its "
                          "permissions.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: byte {exc.start} is not UTF-8. Save the file as UTF-8.") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(path, text, exc) from None
    return policy_from_dict(data, str(path), base_dir=path.parent, text=text)


# --------------------------------------------------------------------------- labels


def stages_due(stages: Sequence[int], due_on: date, business: date, collapse: str,
                earlier: list[tuple[int, date]], calendar: BusinessCalendar | None = None,
                spacing: str = "from_sent") -> list[int]:
    """The stages of one open invoice that a scan for ``business`` creates, by the policy's ``collapse`` rule.

    The one statement of the rule outside SQL (the scan's ``scan_insert_next_reminders``); the demo and the
    invariant checker compute the due set with it, independently of the reminders the scan wrote.

    ``earlier``: (stage, business date) of the invoice's reminders from earlier business dates.
    ``highest``: every stage whose offset has come, above the highest one in ``earlier`` (the ladder never goes
    back; the scan sends the highest and records the others superseded). ``next``: at most the lowest stage
    above the highest one in ``earlier``, once its offset has come,
    a courtesy stage only while the invoice is not overdue, and no sooner than the gap between the two stages
    after the earlier one's business date (``spacing = "from_sent"``; ``"nominal"``: its own offset only).

    ``calendar`` (:mod:`.calendar`): nothing on a non-business ``business`` date, and a stage has come when its
    nominal date (calendar or business days) is on or before ``business``; the spacing rule of ``next`` and the
    courtesy rule stay in calendar days, as in the scan's SQL.
    """
    if calendar is not None and not calendar.is_business_day(business):
        return []
    reached = [s for s in stages if (due_on + timedelta(days=s) if calendar is None
                                     else calendar.nominal(due_on, s)) <= business]
    last = max(earlier, default=None)
    if collapse == "highest":
        return [s for s in reached if last is None or s > last[0]]
    candidates = [s for s in reached if (last is None or s > last[0]) and (s > 0 or business <= due_on)]
    if not candidates:
        return []
    stage = min(candidates)
    if spacing == "from_sent" and last is not None and business < last[1] + timedelta(days=stage - last[0]):
        return []
    return [stage]


def stage_label(stage: int) -> str:
    """Human label of a stage: "3 days before due", "on the due date", "1 day past due"."""
    if stage == 0:
        return "on the due date"
    days = abs(stage)
    unit = "day" if days == 1 else "days"
    return f"{days} {unit} before due" if stage < 0 else f"{days} {unit} past due"


# --------------------------------------------------------------------------- default file


def default_toml() -> str:
    """The commented ``oncebeat.toml`` that ``oncebeat init`` writes; loading it gives ``Policy()``."""
    p = Policy()
    stages = "[" + ", ".join(str(s) for s in p.stages) + "]"
    return f"""\
# oncebeat.toml: the overdue-invoice reminder policy.
#
# Every key is optional; the values below are the defaults. Unknown keys are
# refused, so a typo is reported instead of silently ignored.
# Deployment settings (DATABASE_URL, SMTP_URL, ...) come from the environment.

[schedule]
# When the reminder scan runs: a 5-field cron expression (minute hour day month weekday).
cron = {json.dumps(p.schedule)}
# IANA time zone of your business. The cron expression and "days past due"
# are counted in this zone, never in the server's zone.
tz = {json.dumps(p.tz)}
# Scans missed while oncebeat was down:
#   "none"   skip them (recorded as missed),
#   "latest" run only the newest one (recommended),
#   "all"    run each of them, oldest first.
catchup = {json.dumps(p.catchup)}
# How old a missed scan may be and still be caught up:
# seconds (86400) or a duration such as "90s", "15m", "24h", "2d".
catchup_window = {json.dumps(format_duration(p.catchup_window))}

[reminders]
# Days relative to the due date at which a reminder is sent, strictly increasing.
# 1 = one day past due; negative numbers send a courtesy note before the due
# date (e.g. -3). Each stage is sent at most once per invoice.
stages = {stages}
# When several stages became due at once (downtime, a late import):
#   "next"    send the lowest unsent stage and let the ladder continue from
#             there, one stage a day at most, the gaps between stages kept;
#   "highest" send only the highest due stage, record the lower ones skipped.
collapse = {json.dumps(p.collapse)}
# With "next": after a late stage (an outage, a hold, a holiday) is the next stage
#   "from_sent" due the gap between the two stages after the late one went out, or
#   "nominal"   due on its own date (due date + its days), at most one stage a day?
spacing = {json.dumps(p.spacing)}
# Other ladders for some invoices (by currency, amount, customer field): README, "Several ladders".
# Whose calendar decides the day a reminder goes out and the days past due:
#   "schedule" the [schedule] zone for every customer (the scan's cron decides the time);
#   "customer" each customer's own zone (customer_tz; the [schedule] zone when
#              missing), at send_at local time. The scan then runs every quarter
#              hour (cron defaults to "*/15 * * * *").
send_zone = {json.dumps(p.send_zone)}
send_at = {json.dumps(p.send_at)}
# A folder with your own templates (relative to this file). A file there
# replaces the built-in file of the same name, e.g. reminder_first.txt.j2,
# or reminder_stage_14.html.j2 for one stage only.
# templates = "templates"
# Each email is in the customer's language when one ships (en, de, fr, es; de_AT
# gets German words with Austrian amounts and dates). Any other customer (ja, ar,
# pt, a missing or unknown locale) gets words, amounts and dates in this locale.
fallback_locale = {json.dumps(p.fallback_locale)}
# "customer": one notice per customer and business date listing every invoice due
# that day (one email, one place under max_notices_per_week); "none": one email
# per invoice and stage. A [[ladders]] table may set its own.
group = {json.dumps(p.group)}
# At most this many notices per customer in any 7 days, over all their invoices;
# the others are deferred to the next allowed day (never lost, stage order kept).
# max_notices_per_week = 2
# Send only while the freshest payment data (the last CSV import, Stripe event,
# API import or [source] read) is at most this old; until then sends wait.
# max_payment_staleness = "6h"

[sender]
# The From address of reminder emails.
from = {json.dumps(p.sender)}
# Where customer replies go, if not to the From address.
# reply_to = "accounts@example.com"
# Your company name as shown in the emails.
company = {json.dumps(p.company)}

[delivery]
# A mail outage (SMTP server down, answering 4xx, refusing TLS or the login) is a
# delay, not a failure: each reminder due then is retried with backoff, without
# using up its attempts, for this long before it is marked failed. At least "1h".
outage_retry = {json.dumps(format_duration(p.outage_retry))}
# A relay that caps messages per minute: at most this many sends in ANY minute
# (a sliding window, not per clock minute), counted over every worker through
# the database. A send over the limit waits (its job is snoozed), never fails.
# max_per_minute = 60
# The window max_per_minute counts over, from 1s to 1h ("1h" with the hourly cap
# for a relay that counts per hour).
# rate_window = "1m"
# A relay that caps connections per client: SMTP connections each worker
# PROCESS keeps at most (default: one per handler slot, --concurrency). A relay
# refusing one more (421 at connect) shrinks the pool by itself; that is a
# delay, not an outage.
# max_connections = 4

# [calendar]
# Business days (README, "Business calendar"). Off unless set: every day is a business day.
# A stage whose day is a weekend day or a public holiday goes out on the next business
# day at the send time (in each customer's zone with send_zone = "customer").
# country = "US"               # public holidays of this country, from the holidays package
# subdivision = "IL"           # optional: a state, province or Land ("BY" with country = "DE")
# weekend = ["sat", "sun"]     # weekdays nothing goes out on
# stage_days = "calendar"      # "business": stage N is the N-th business day after the due date
# send_window = "08:00-17:00"  # optional: local hours an email may leave in (a catch-up or a
#                              # retry outside waits for the next business day's window)
# [attachments]
# Attach the invoice's PDF (a pdf_path column, else <pdf_dir>/<number>.pdf; never
# a file outside pdf_dir) and/or a statement of account per customer: "never",
# "final" (the last stage), "always" or stages such as [14, 30]. A reminder whose
# file is missing fails naming it; it is never sent without (docs/attachments.md).
# invoice_pdf = true
# pdf_dir = "invoices/pdf"
# statement = "final"
# max_attachment_bytes = 10485760

# [stage.30]
# Escalation per stage (README, "Escalation and fees, once"): CC in the Cc header,
# BCC as envelope recipients only, and a late fee in minor units of the invoice's
# currency, recorded once per invoice and stage. [reminders] notify_final =
# "collections@example.com" emails your team when a final stage went out.
# cc = ["Account Owner <owner@example.com>"]
# bcc = ["collections@example.com"]
# fee = {{ percent = 1.5, cap = 5000 }}   # or fee = {{ fixed = 2500 }}

# [retention]
# Prune the engine's history (finished jobs, old occurrences, effects, audit
# events) once a day, keeping what the guarantees need (README, "Retention").
# Off unless set; at least a day. Same as `oncebeat prune --older-than 90d --apply`.
# older_than = "90d"
# cron = "30 3 * * *"    # in the [schedule] zone

# Schedules pushed to workers you already run, once per occurrence (README, Targets):
# a Celery task ("celery:billing.tasks.x", broker = "$CELERY_BROKER_URL"), a Sidekiq
# job ("sidekiq:OverdueReminderJob", redis = "$REDIS_URL"; activejob = true for an
# Active Job) or an HTTP endpoint ("http:https://...", secret_env = "HOOK_SECRET").
# [[schedules]]
# key = "overdue-reminders"
# cron = "0 8 * * *"
# tz = "America/Chicago"
# target = "sidekiq:OverdueReminderJob"
# redis = "$REDIS_URL"
# queue = "default"
"""


def write_default_config(path: Path, *, force: bool = False) -> None:
    """Write :func:`default_toml` to ``path``; an existing file is kept unless ``force``."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder. Pass a file path such as {path / DEFAULT_CONFIG_NAME}.")
    if path.exists() and not force:
        raise ConfigError(f"{path}: already exists; not overwritten. Edit it, or pass --force to replace it with the "
                          "defaults.")
    text = default_toml()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w" if force else "x", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    except FileExistsError:
        raise ConfigError(f"{path}: already exists; not overwritten. Edit it, or pass --force to replace it with the "
                          "defaults.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the file ({exc.strerror or exc}). Check the folder and its "
                          "permissions.") from None
