"""The commented ``oncebeat.toml`` that ``oncebeat init`` writes (:func:`default_toml`; loading it gives ``Policy()``)
and writing it (:func:`write_default_config`).
"""

from __future__ import annotations

import json
from pathlib import Path

from oncebeat.durations import format_duration
from oncebeat.errors import ConfigError
from oncebeat.reminders.policy.loading import DEFAULT_CONFIG_NAME
from oncebeat.reminders.policy.model import Policy


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
