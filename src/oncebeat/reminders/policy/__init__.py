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

The package's rooms: :mod:`.model` (:class:`Policy` and its checks across fields), :mod:`.loading` (the TOML layout,
:func:`policy_from_dict`, :func:`load_policy`), the keys of each section (:mod:`.schedule_keys`, :mod:`.reminders_keys`,
:mod:`.sender_keys`, :mod:`.delivery_keys`), the sections other modules check (:mod:`.sections`), the table of every
field's check (:mod:`.checks`), how a problem is told (:mod:`.problems`) and where a ``[stage.N]`` one sits in the file
(:mod:`.lines`), the stages a scan creates (:mod:`.stages`) and the default file (:mod:`.default_file`). Every name is
imported from here, as when this was one module (the private ``_CHECKS``, ``_Invalid``, ``_describe``, ``_show``,
``_type_name`` and ``_unknown_key`` too: :mod:`oncebeat.reminders.ladders` checks ``[[ladders]]`` tables with them).
"""

from __future__ import annotations

from oncebeat.durations import format_duration, parse_duration
from oncebeat.reminders.policy.checks import _CHECKS as _CHECKS
from oncebeat.reminders.policy.default_file import default_toml, write_default_config
from oncebeat.reminders.policy.delivery_keys import MAX_OUTAGE_RETRY as MAX_OUTAGE_RETRY
from oncebeat.reminders.policy.delivery_keys import MAX_PER_MINUTE as MAX_PER_MINUTE
from oncebeat.reminders.policy.delivery_keys import MAX_RATE_WINDOW as MAX_RATE_WINDOW
from oncebeat.reminders.policy.delivery_keys import MAX_SMTP_CONNECTIONS as MAX_SMTP_CONNECTIONS
from oncebeat.reminders.policy.delivery_keys import MIN_OUTAGE_RETRY as MIN_OUTAGE_RETRY
from oncebeat.reminders.policy.delivery_keys import MIN_RATE_WINDOW as MIN_RATE_WINDOW
from oncebeat.reminders.policy.loading import DEFAULT_CONFIG_NAME, load_policy, policy_from_dict
from oncebeat.reminders.policy.model import Policy
from oncebeat.reminders.policy.problems import _describe as _describe
from oncebeat.reminders.policy.problems import _Invalid as _Invalid
from oncebeat.reminders.policy.problems import _show as _show
from oncebeat.reminders.policy.problems import _type_name as _type_name
from oncebeat.reminders.policy.problems import _unknown_key as _unknown_key
from oncebeat.reminders.policy.reminders_keys import COLLAPSE_MODES as COLLAPSE_MODES
from oncebeat.reminders.policy.reminders_keys import DEFAULT_SCHEDULE as DEFAULT_SCHEDULE
from oncebeat.reminders.policy.reminders_keys import GROUPS as GROUPS
from oncebeat.reminders.policy.reminders_keys import MAX_NOTICES_PER_WEEK as MAX_NOTICES_PER_WEEK
from oncebeat.reminders.policy.reminders_keys import MAX_PAYMENT_STALENESS as MAX_PAYMENT_STALENESS
from oncebeat.reminders.policy.reminders_keys import MAX_STAGE, MIN_STAGE, scan_expression
from oncebeat.reminders.policy.reminders_keys import MIN_PAYMENT_STALENESS as MIN_PAYMENT_STALENESS
from oncebeat.reminders.policy.reminders_keys import QUARTER_HOURLY as QUARTER_HOURLY
from oncebeat.reminders.policy.reminders_keys import SEND_ZONES as SEND_ZONES
from oncebeat.reminders.policy.schedule_keys import CATCHUP_POLICIES
from oncebeat.reminders.policy.schedule_keys import DEFAULT_RETENTION_CRON as DEFAULT_RETENTION_CRON
from oncebeat.reminders.policy.schedule_keys import MAX_CATCHUP_WINDOW as MAX_CATCHUP_WINDOW
from oncebeat.reminders.policy.schedule_keys import OVERLAP_POLICIES as OVERLAP_POLICIES
from oncebeat.reminders.policy.stages import stage_label, stages_due

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
