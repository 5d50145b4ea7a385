-- 0006 (reminders line): a mail outage is a delay, not a failure (issue 9 item 7).
-- reminders.deferred_since: when the mail server first refused this pending reminder's session (connect, TLS,
-- auth, a 4xx reply); its send job is snoozed (no attempt used up) until the policy's outage_retry has passed
-- since then. NULL when the reminder is not waiting out an outage.
ALTER TABLE reminders ADD COLUMN deferred_since TIMESTAMPTZ;
