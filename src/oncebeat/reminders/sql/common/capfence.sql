-- The per-customer cap and the payment-freshness fence (oncebeat.reminders.capfence; reminders migration 0013).
-- A reminder claims a place under its customer's cap (cap_day) in the same transaction that counted the places
-- already taken, under a lock per customer: on SQLite every write transaction runs alone (BEGIN IMMEDIATE);
-- postgres/capfence.sql locks the customer's row.

-- name: cap_lock_customer
-- The customer of invoice :invoice_id (the lock itself is PostgreSQL's override).
SELECT customer_id FROM invoices WHERE id = :invoice_id;

-- name: cap_lock_customer_id
-- As cap_lock_customer, for a grouped notice (which names its customer).
SELECT id AS customer_id FROM customers WHERE id = :customer_id;

-- name: cap_reminder
SELECT id, state, cap_day, capped_at FROM reminders WHERE id = :id;

-- name: cap_counted
-- The notices that count against customer :customer_id's cap since day :since (instant :since_at, the start of
-- that day in its zone): places claimed on or after :since by reminders sent, in doubt or being sent, and
-- (claimed by none: sent before the cap was set) reminders sent or in doubt since :since_at. The rows one grouped
-- notice lists (notice_id, reminders 0017) count once: the caller counts distinct notices.
SELECT r.id, r.cap_day, COALESCE(r.sent_at, r.updated_at) AS at, r.notice_id
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE i.customer_id = :customer_id AND r.id <> :id
  AND (r.notice_id IS NULL OR r.notice_id <> :notice_id)
  AND ((r.cap_day IS NOT NULL AND r.cap_day >= :since AND r.state IN ('pending', 'sent', 'in_doubt'))
       OR (r.cap_day IS NULL AND r.state IN ('sent', 'in_doubt') AND COALESCE(r.sent_at, r.updated_at) >= :since_at));

-- name: cap_waiting
-- The customer's open invoices' reminders waiting for a place (deferred, or pending without one), in the order
-- they get the places: the earliest business date first (they have waited longest), then stage, then id. An
-- invoice whose Stripe payment is processing waits for it, not for a place: it does not stand in the line.
SELECT r.id FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE i.customer_id = :customer_id AND i.status = 'open' AND r.cap_day IS NULL
  AND r.state IN ('pending', 'deferred') AND i.payment_processing_since IS NULL
ORDER BY r.business_date, r.stage, r.id
LIMIT :places;

-- name: cap_claim
UPDATE reminders SET state = 'pending', cap_day = :day, updated_at = :now
WHERE id = :id AND state IN ('pending', 'deferred') AND cap_day IS NULL
RETURNING id;

-- name: cap_defer
-- Not final: the row keeps its (invoice, stage) and its send job, snoozed until the next allowed day.
UPDATE reminders SET state = 'deferred', reason = :reason, cap_reason = :reason,
    capped_at = COALESCE(capped_at, :now), updated_at = :now
WHERE id = :id AND state IN ('pending', 'deferred')
RETURNING id;

-- name: cap_wake
-- The send job of a deferred reminder runs again: it is pending while the job decides (sent, skipped, held or
-- deferred again); the cap's trace (capped_at, cap_reason) stays.
UPDATE reminders SET state = 'pending', updated_at = :now
WHERE id = :id AND state = 'deferred'
RETURNING id;

-- name: cap_deferred_summary
-- Deferred reminders: how many, and the next one's cap sentence (doctor, dashboard).
SELECT r.id, r.reason, r.capped_at, i.number, c.email
FROM reminders r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE r.state = 'deferred'
ORDER BY r.capped_at, r.id;

-- name: watermark_touch
-- Source :source's payment data was refreshed at :now (never moves back).
INSERT INTO payment_watermarks (source, refreshed_at, detail) VALUES (:source, :now, :detail)
ON CONFLICT (source) DO UPDATE SET refreshed_at = excluded.refreshed_at, detail = excluded.detail
WHERE payment_watermarks.refreshed_at <= excluded.refreshed_at;

-- name: watermarks
SELECT source, refreshed_at, detail FROM payment_watermarks ORDER BY refreshed_at DESC, source;

-- name: sql_source_watermark
-- Each SQL source's watermark: the started_at of its last good read (0011), one row per source.
SELECT r.source, r.started_at FROM source_reads r
WHERE r.outcome = 'ok' AND NOT EXISTS (
    SELECT 1 FROM source_reads n WHERE n.source = r.source AND n.outcome = 'ok'
      AND (n.started_at > r.started_at OR (n.started_at = r.started_at AND n.id > r.id)))
ORDER BY r.started_at DESC, r.source;

-- name: payment_source_set
-- Source :source last wrote invoice :number: its payment data comes from there (0020).
UPDATE invoices SET payment_source = :source WHERE number = :number;

-- name: payment_processing_mark
-- Stripe: a payment of invoice :number is processing (:now) or ended (:now NULL). Returns the invoice's id.
UPDATE invoices SET payment_processing_since = :now WHERE number = :number
RETURNING id;

-- name: fence_wait
-- A pending reminder's send waits (fresher payment data, a processing payment): its reason says why.
UPDATE reminders SET reason = :reason, updated_at = :now
WHERE id = :id AND state = 'pending'
RETURNING id;

-- name: fence_waiting
SELECT r.id, r.reason, r.updated_at, i.number, i.payment_source FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.state = 'pending' AND r.reason LIKE 'waiting: %'
ORDER BY r.updated_at DESC, r.id DESC;
