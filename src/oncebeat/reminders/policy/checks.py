"""Every :class:`~oncebeat.reminders.policy.Policy` field's check, in one table (``_CHECKS``): building a Policy runs
each field through its check, and ``[[ladders]]`` overrides go through the same ones.
"""

from __future__ import annotations

from oncebeat.reminders.policy.delivery_keys import (
    _check_max_connections,
    _check_max_per_minute,
    _check_outage_retry,
    _check_rate_window,
)
from oncebeat.reminders.policy.reminders_keys import (
    _check_collapse,
    _check_fallback_locale,
    _check_group,
    _check_max_notices_per_week,
    _check_max_payment_staleness,
    _check_notify_final,
    _check_send_at,
    _check_send_zone,
    _check_spacing,
    _check_stages,
    _check_templates,
)
from oncebeat.reminders.policy.schedule_keys import (
    _check_catchup,
    _check_catchup_window,
    _check_overlap,
    _check_retention,
    _check_schedule,
    _check_tz,
)
from oncebeat.reminders.policy.sections import (
    _check_attachments,
    _check_calendar,
    _check_escalation,
    _check_ladders,
    _check_source,
    _check_target_schedules,
)
from oncebeat.reminders.policy.sender_keys import _check_company, _check_reply_to, _check_sender

#: Policy field -> its check: the value as the Policy keeps it, or :class:`.problems._Invalid`.
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
    "escalation": _check_escalation,
    "notify_final": _check_notify_final,
    "max_notices_per_week": _check_max_notices_per_week,
    "max_payment_staleness": _check_max_payment_staleness,
    "group": _check_group,
}
