"""The validated policy value, :class:`Policy`: each field checked (:mod:`.checks`), then the checks across fields
(the quarter-hourly scan of ``send_zone = "customer"``, the send window, retention, the stages statements and
``[stage.N]`` tables name, each ladder's send time).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from oncebeat.app import ScheduleDef
from oncebeat.reminders.calendar import BusinessCalendar
from oncebeat.reminders.notices.attachments import AttachmentPolicy
from oncebeat.reminders.notices.escalation import stage_problems
from oncebeat.reminders.policy.checks import _CHECKS
from oncebeat.reminders.policy.problems import _config_error, _describe, _Invalid
from oncebeat.reminders.policy.reminders_keys import QUARTER_HOURLY, _fires_every_quarter_hour, scan_expression
from oncebeat.reminders.policy.schedule_keys import DEFAULT_RETENTION_CRON
from oncebeat.reminders.sources.database import SourceConfig
from oncebeat.reminders.translations import DEFAULT_FALLBACK_LOCALE


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
