-- One notice per customer (oncebeat.reminders.notices.grouping; reminders migration 0017). A notice groups the
-- reminders of one customer due on one business date under one ladder version (group = "customer"); it is sent
-- as one effect, frozen at its first attempt, and each row it lists points to it (reminders.notice_id).

-- name: notice_open
-- The notice of customer :customer_id on :business_date under ladder version :ladder_version_id, made once; the
-- no-op update locks it on PostgreSQL until the caller commits (notice_lock takes the same lock), so a reminder
-- joins a notice either before its rows are chosen (listed) or after (it goes out on its own), never in between.
INSERT INTO notices (customer_id, business_date, ladder_version_id, state, created_at, updated_at)
VALUES (:customer_id, :business_date, :ladder_version_id, 'pending', :now, :now)
ON CONFLICT (customer_id, business_date, ladder_version_id) DO UPDATE SET updated_at = notices.updated_at
RETURNING id, state, assigned_at;

-- name: notice_lock
UPDATE notices SET updated_at = updated_at WHERE id = :id
RETURNING id, state, assigned_at;

-- name: notice_get
SELECT n.id, n.customer_id, n.business_date, n.ladder_version_id, n.effect_key, n.state, n.reason, n.message_id,
       n.deferred_since, n.created_at, n.assigned_at, n.frozen_at, n.sent_at, n.updated_at,
       c.email, c.name, c.locale, c.tz
FROM notices n JOIN customers c ON c.id = n.customer_id
WHERE n.id = :id;

-- name: notice_row_owner
-- The customer and the notice (if any) of reminder :id.
SELECT r.notice_id, i.customer_id FROM reminders r JOIN invoices i ON i.id = r.invoice_id WHERE r.id = :id;

-- name: notice_candidates
-- The rows notice :notice_id may list: the customer's reminders of its business date and ladder version still
-- to send (pending, or deferred by the cap), not listed by another notice; invoice fields as the send reads them.
-- :open = 0 once the notice's rows were chosen (assigned_at): then only those.
SELECT r.id, r.stage, r.state, r.business_date, r.notice_id, r.cap_day, r.hold_id,
       i.id AS invoice_id, i.number, i.currency, i.amount_due, i.issued_on, i.due_on, i.status, i.paid_on,
       i.payment_url
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE i.customer_id = :customer_id AND r.business_date = :business_date
  AND r.ladder_version_id = :ladder_version_id AND r.state IN ('pending', 'deferred')
  AND (r.notice_id = :notice_id OR (r.notice_id IS NULL AND :open = 1))
  -- an invoice whose Stripe payment is processing waits for it (its own send, later), not in a notice
  AND (r.notice_id IS NOT NULL OR i.payment_processing_since IS NULL)
ORDER BY i.number, r.stage, r.id;

-- name: notice_rows
-- The rows notice :notice_id lists, in the order the email lists them.
SELECT r.id, r.stage, r.state, r.business_date, r.message_id, r.sent_at, r.cap_day, r.ladder_version_id,
       i.id AS invoice_id, i.number, i.currency, i.amount_due, i.issued_on, i.due_on, i.status, i.paid_on,
       i.payment_url, i.pdf_path
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.notice_id = :notice_id
ORDER BY i.number, r.stage, r.id;

-- name: notice_assign
-- Reminder :id is listed by notice :notice_id (it stays pending until the notice is decided).
UPDATE reminders SET notice_id = :notice_id, state = 'pending', updated_at = :now
WHERE id = :id AND state IN ('pending', 'deferred') AND (notice_id IS NULL OR notice_id = :notice_id)
RETURNING id;

-- name: notice_release
-- Reminder :id is no longer listed by notice :notice_id (skipped or held before the notice was frozen).
UPDATE reminders SET notice_id = NULL WHERE id = :id AND notice_id = :notice_id AND state <> 'pending'
RETURNING id;

-- name: notice_release_pending
-- A frozen notice gone stale is not sent: the rows still pending leave it and go out on their own.
UPDATE reminders SET notice_id = NULL, cap_day = NULL
WHERE notice_id = :notice_id AND state = 'pending'
RETURNING id;

-- name: notice_assigned
-- The notice's rows are chosen: from now on it lists exactly them (the first attempt freezes them).
UPDATE notices SET assigned_at = COALESCE(assigned_at, :now), effect_key = :key, message_id = :message_id,
    reason = NULL, updated_at = :now
WHERE id = :id AND state = 'pending'
RETURNING id;

-- name: notice_frozen
-- The attempt that chose the rows hands the message to the ledger now (the claim that freezes it).
UPDATE notices SET frozen_at = :now, updated_at = :now WHERE id = :id
RETURNING id;

-- name: notice_finish
-- Notice :id is decided (sent, in_doubt, failed, skipped) or, from in_doubt, put back to pending.
UPDATE notices SET state = :state, reason = :reason, message_id = COALESCE(:message_id, message_id),
    sent_at = COALESCE(:sent_at, sent_at), updated_at = :now
WHERE id = :id AND state = :from_state
RETURNING id;

-- name: notice_finish_rows
-- Every row notice :notice_id lists follows it (in the same transaction).
UPDATE reminders SET state = :state, reason = :reason, message_id = COALESCE(:message_id, message_id),
    sent_at = COALESCE(:sent_at, sent_at), updated_at = :now
WHERE notice_id = :notice_id AND state = :from_state
RETURNING id, stage;

-- name: notice_wait
-- A mail outage or a wait: the notice's reason says why; the first refusal's instant is kept.
UPDATE notices SET reason = :reason, deferred_since = COALESCE(deferred_since, CASE WHEN :outage = 1 THEN :now END),
    updated_at = :now
WHERE id = :id AND state = 'pending'
RETURNING deferred_since;

-- name: notices_of_invoice
-- The notices that listed invoice :invoice_id, each with every row it listed (the dashboard, evidence).
SELECT n.id AS notice_id, n.state AS notice_state, n.message_id AS notice_message_id, n.business_date,
       n.sent_at AS notice_sent_at, r.id AS reminder_id, r.stage, r.state, i.number
FROM notices n JOIN reminders r ON r.notice_id = n.id JOIN invoices i ON i.id = r.invoice_id
WHERE n.id IN (SELECT x.notice_id FROM reminders x WHERE x.invoice_id = :invoice_id AND x.notice_id IS NOT NULL)
ORDER BY n.id, i.number, r.stage;

-- name: notices_all
-- Every notice with its rows (the simulator's checker).
SELECT n.id AS notice_id, n.customer_id, n.business_date, n.ladder_version_id, n.state AS notice_state,
       n.message_id AS notice_message_id, n.frozen_at, r.id AS reminder_id, r.stage, r.state, r.message_id,
       i.number
FROM notices n LEFT JOIN reminders r ON r.notice_id = n.id LEFT JOIN invoices i ON i.id = r.invoice_id
ORDER BY n.id, i.number, r.stage;
