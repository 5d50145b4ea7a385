-- Queries of the overdue-invoice domain (SQLite). Same names as postgres/reminders.sql.

-- name: upsert_customer
INSERT INTO customers (email, name, locale, tz) VALUES (:email, :name, :locale, :tz)
ON CONFLICT (email) DO UPDATE SET name = excluded.name, locale = excluded.locale, tz = excluded.tz;

-- name: upsert_invoice
-- A paid invoice is never reopened by a row without newer payment information (G6): it stays paid unless the
-- row's status_on is after the payment, or :reopen (--reopen) says so. paid_at records when it became paid here.
INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, updated_at)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, :paid_on, :now)
ON CONFLICT (number) DO UPDATE SET
    customer_id = excluded.customer_id, currency = excluded.currency, amount_due = excluded.amount_due,
    issued_on = excluded.issued_on, due_on = excluded.due_on,
    status = CASE WHEN excluded.status <> 'paid' AND invoices.status = 'paid' AND NOT :reopen
                 AND (:status_on IS NULL OR invoices.paid_on IS NULL
                      OR :status_on <= invoices.paid_on)
             THEN invoices.status ELSE excluded.status END,
    paid_on = CASE WHEN excluded.status <> 'paid' AND invoices.status = 'paid' AND NOT :reopen
                 AND (:status_on IS NULL OR invoices.paid_on IS NULL
                      OR :status_on <= invoices.paid_on)
              THEN invoices.paid_on ELSE excluded.paid_on END,
    paid_at = CASE WHEN excluded.status = 'paid' AND invoices.status <> 'paid' THEN excluded.updated_at
                   WHEN excluded.status = 'paid' THEN invoices.paid_at
                   WHEN invoices.status = 'paid' AND NOT :reopen
                 AND (:status_on IS NULL OR invoices.paid_on IS NULL
                      OR :status_on <= invoices.paid_on)
                   THEN invoices.paid_at
                   ELSE NULL END,
    updated_at = excluded.updated_at;

-- name: invoice_states
-- Status and payment date of the invoices with these numbers (what an import is about to change).
SELECT number, status, paid_on, issued_on FROM invoices WHERE number IN (SELECT value FROM json_each(:numbers));

-- name: existing_invoice_numbers
SELECT number FROM invoices WHERE number IN (SELECT value FROM json_each(:numbers));

-- name: mark_paid
UPDATE invoices SET status = 'paid', paid_on = :paid_on, paid_at = :now, updated_at = :now
WHERE number = :number AND status = 'open'
RETURNING id;

-- name: scan_lock
-- Scans run one at a time: on SQLite every write transaction already does (BEGIN IMMEDIATE), so nothing to take.
SELECT 1 AS locked;

-- name: scan_insert_reminders
-- :stages is a JSON list of {"stage": N, "cutoff": "YYYY-MM-DD", "business_date": "YYYY-MM-DD", "tz": Z|null}:
-- a stage is due for an invoice when due_on <= cutoff (= business date - N days). tz null: every customer
-- (send_zone = "schedule"); otherwise the row applies to customers whose zone (customer tz, else :default_tz)
-- is Z, with that zone's business date (send_zone = "customer").
-- collapse = "highest": one row per invoice, its highest due stage, pending, when that stage is above every
-- stage the invoice already has (the ladder never goes back); the lower stages that became due with it and
-- were not recorded before go into its superseded_stages (a JSON array: skipped, superseded; never sent later).
-- Each invoice meets exactly one ladder row: the stage whose due dates run from its own cutoff down to (not
-- including) the next higher stage's cutoff; no per-invoice aggregate, one index range scan per stage.
-- Returns one row per reminder created: pending (1) and its number of superseded stages.
WITH stages AS (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date
    FROM json_each(:stages)
), ladder AS (
    SELECT s.stage, s.cutoff, s.tz, s.business_date,
           LEAD(s.cutoff) OVER (PARTITION BY s.tz ORDER BY s.stage) AS higher_cutoff,
           (SELECT json_group_array(l.stage) FROM (SELECT l.stage FROM stages l WHERE l.tz IS s.tz AND l.stage < s.stage
                                                  ORDER BY l.stage) AS l) AS lower
    FROM stages s
), due AS (
    SELECT i.id AS invoice_id, s.stage, s.business_date, s.lower,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage
    FROM ladder s
    JOIN invoices i INDEXED BY invoices_open_due
      ON i.due_on <= s.cutoff AND i.due_on > COALESCE(s.higher_cutoff, '')
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
)
INSERT INTO reminders (invoice_id, stage, state, reason, superseded_stages, occurrence_id, business_date,
                       created_at, updated_at)
SELECT invoice_id, stage, 'pending', NULL,
       CASE WHEN last_stage IS NULL THEN NULLIF(lower, '[]')
            ELSE (SELECT NULLIF(json_group_array(x.value), '[]') FROM json_each(lower) AS x WHERE x.value > last_stage)
       END,
       :occurrence_id, business_date, :now, :now
FROM due
WHERE last_stage IS NULL OR stage > last_stage
ON CONFLICT DO NOTHING
RETURNING 1 AS pending, COALESCE(json_array_length(superseded_stages), 0) AS superseded;

-- name: scan_insert_next_reminders
-- :stages is a JSON list of {"stage": N, "cutoff": "YYYY-MM-DD", "business_date": "YYYY-MM-DD", "tz": Z|null}:
-- a stage is due for an invoice when due_on <= cutoff (= business date - N days). tz null: every customer
-- (send_zone = "schedule"); otherwise the row applies to customers whose zone (customer tz, else :default_tz)
-- is Z, with that zone's business date (send_zone = "customer").
-- collapse = "next" (README "Stage order after an outage"): each open invoice gets at most ONE stage, the lowest
-- ladder stage above the highest stage it already has (the ladder never goes back), when that stage's own offset
-- has come, a courtesy stage (<= 0) only while the invoice is not yet overdue, and no sooner than
-- (stage - previous stage) days after the previous stage's business date. Nothing is recorded superseded.
-- Returns one row per reminder created: pending (1), superseded (0).
WITH stages AS (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date
    FROM json_each(:stages)
), open_due AS (
    SELECT i.id AS invoice_id, i.due_on, i.customer_id,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage
    FROM invoices i INDEXED BY invoices_open_due
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
), nxt AS (
    SELECT i.invoice_id, i.last_stage, s.business_date, MIN(s.stage) AS stage
    FROM open_due i JOIN stages s ON i.due_on <= s.cutoff
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE (i.last_stage IS NULL OR s.stage > i.last_stage) AND (s.stage > 0 OR i.due_on >= s.business_date)
    GROUP BY i.invoice_id, i.last_stage, s.business_date
), ready AS (
    SELECT n.invoice_id, n.stage, n.business_date FROM nxt n
    LEFT JOIN reminders p ON p.invoice_id = n.invoice_id AND p.stage = n.last_stage
    WHERE n.last_stage IS NULL OR date(p.business_date, '+' || (n.stage - n.last_stage) || ' days') <= n.business_date
)
INSERT INTO reminders (invoice_id, stage, state, reason, occurrence_id, business_date, created_at, updated_at)
SELECT invoice_id, stage, 'pending', NULL, :occurrence_id, business_date, :now, :now
FROM ready
WHERE true
ON CONFLICT DO NOTHING
RETURNING 1 AS pending, 0 AS superseded;

-- name: pending_send_jobs
-- The send job of every pending reminder (Queue.enqueue_select inserts them; the unique key skips a reminder
-- whose send job is unfinished), so a reminder whose job was discarded (e.g. its worker died on the last
-- attempt) is retried by the next scan.
SELECT json_object('reminder_id', r.id) AS args, 'reminder:' || r.id AS unique_key, r.occurrence_id
FROM reminders r
WHERE r.state = 'pending';

-- name: preview_due
-- What scan_insert_reminders would create (nothing written): per invoice its top stage and how many lower
-- stages it would record superseded.
WITH stages AS (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date
    FROM json_each(:stages)
), ladder AS (
    SELECT s.stage, s.cutoff, s.tz, s.business_date,
           LEAD(s.cutoff) OVER (PARTITION BY s.tz ORDER BY s.stage) AS higher_cutoff,
           (SELECT json_group_array(l.stage) FROM (SELECT l.stage FROM stages l WHERE l.tz IS s.tz AND l.stage < s.stage
                                                  ORDER BY l.stage) AS l) AS lower
    FROM stages s
), due AS (
    SELECT i.id AS invoice_id, s.stage, s.business_date, s.lower,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage
    FROM ladder s
    JOIN invoices i INDEXED BY invoices_open_due
      ON i.due_on <= s.cutoff AND i.due_on > COALESCE(s.higher_cutoff, '')
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
)
SELECT i.number, c.email, c.name, i.currency, i.amount_due, i.due_on, d.stage,
       CASE WHEN d.last_stage IS NULL THEN json_array_length(d.lower)
            ELSE (SELECT COUNT(*) FROM json_each(d.lower) AS x WHERE x.value > d.last_stage) END AS superseded
FROM due d JOIN invoices i ON i.id = d.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE d.last_stage IS NULL OR d.stage > d.last_stage
ORDER BY i.due_on, i.number;

-- name: preview_next_due
-- What scan_insert_next_reminders would create (nothing written).
WITH stages AS (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date
    FROM json_each(:stages)
), open_due AS (
    SELECT i.id AS invoice_id, i.due_on, i.customer_id,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage
    FROM invoices i INDEXED BY invoices_open_due
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
), nxt AS (
    SELECT i.invoice_id, i.last_stage, s.business_date, MIN(s.stage) AS stage
    FROM open_due i JOIN stages s ON i.due_on <= s.cutoff
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE (i.last_stage IS NULL OR s.stage > i.last_stage) AND (s.stage > 0 OR i.due_on >= s.business_date)
    GROUP BY i.invoice_id, i.last_stage, s.business_date
), ready AS (
    SELECT n.invoice_id, n.stage, n.business_date FROM nxt n
    LEFT JOIN reminders p ON p.invoice_id = n.invoice_id AND p.stage = n.last_stage
    WHERE n.last_stage IS NULL OR date(p.business_date, '+' || (n.stage - n.last_stage) || ' days') <= n.business_date
)
SELECT i.number, c.email, c.name, i.currency, i.amount_due, i.due_on, r.stage, 0 AS superseded
FROM ready r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
ORDER BY i.due_on, i.number;

-- name: get_reminder_for_send
SELECT r.id, r.stage, r.state, r.business_date, r.occurrence_id, r.message_id, r.deferred_since,
       i.id AS invoice_id, i.number, i.currency, i.amount_due, i.issued_on, i.due_on, i.status, i.paid_on,
       c.email, c.name, c.locale, c.tz
FROM reminders r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE r.id = :id;

-- name: finish_reminder
UPDATE reminders SET state = :state, reason = :reason, message_id = :message_id, sent_at = :sent_at, updated_at = :now
WHERE id = :id AND state = :from_state
RETURNING id;

-- name: defer_reminder
-- A pending reminder waits out a mail outage: the first refusal's instant is kept, the last refusal is the reason.
UPDATE reminders SET deferred_since = COALESCE(deferred_since, :now), reason = :reason, updated_at = :now
WHERE id = :id AND state = 'pending'
RETURNING deferred_since;

-- name: retry_failed_reminders
-- An operator's retry: failed reminders (failed since :since) become pending again, never one whose email may
-- have gone out (its effect done, in doubt or being sent).
UPDATE reminders SET state = 'pending', reason = :reason, deferred_since = NULL, updated_at = :now
WHERE state = 'failed' AND updated_at >= :since
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.key = 'reminder:' || reminders.id
                  AND e.state IN ('done', 'in_doubt', 'started'))
RETURNING id;

-- name: reminder_counts
-- Reminders per stage and state (index reminders_stage_state); a stage recorded superseded in a higher stage's
-- row (superseded_stages, reminders 0007) counts as skipped.
SELECT stage, state, SUM(n) AS n FROM (
    SELECT stage, state, COUNT(*) AS n FROM reminders GROUP BY stage, state
    UNION ALL
    SELECT CAST(s.value AS INTEGER) AS stage, 'skipped' AS state, COUNT(*) AS n
    FROM reminders r, json_each(r.superseded_stages) AS s
    WHERE r.superseded_stages IS NOT NULL GROUP BY s.value
)
GROUP BY stage, state ORDER BY stage, state;

-- name: list_reminders
SELECT r.*, i.number, i.due_on, i.status AS invoice_status, i.paid_on
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
ORDER BY r.id;

-- name: list_invoices
SELECT i.*, c.email, c.name, c.locale, c.tz AS customer_tz
FROM invoices i JOIN customers c ON c.id = i.customer_id ORDER BY i.id;

-- name: count_invoices
SELECT status, COUNT(*) AS n FROM invoices GROUP BY status ORDER BY status;

-- name: aging
-- Grouped per (currency, due date) first, in the order of the partial index invoices_open_aging (a streaming
-- aggregate, no per-invoice bucket text to hash); the few hundred groups are then put in their buckets.
SELECT currency,
       CASE WHEN d <= 0 THEN 'current'
            WHEN d <= 30 THEN '1-30'
            WHEN d <= 60 THEN '31-60'
            WHEN d <= 90 THEN '61-90'
            ELSE '90+' END AS bucket,
       SUM(n) AS invoices, SUM(amount) AS amount
FROM (SELECT currency, CAST(julianday(:as_of) - julianday(due_on) AS INTEGER) AS d, COUNT(*) AS n, SUM(amount_due) AS amount
      FROM invoices WHERE status = 'open' GROUP BY currency, due_on) AS o
GROUP BY currency, bucket
ORDER BY currency, bucket;

-- name: pending_reminders
SELECT r.id, r.stage, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.state = 'pending' ORDER BY r.id;

-- Read verbs of the reminder app for operators (dashboard). Each reads a unique or foreign-key index.

-- name: invoice_by_number
SELECT i.*, c.email, c.name, c.locale, c.tz AS customer_tz
FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.number = :number;

-- name: invoices_of_email
SELECT i.*, c.email, c.name, c.locale, c.tz AS customer_tz
FROM customers c JOIN invoices i ON i.customer_id = c.id
WHERE c.email = :email ORDER BY i.id DESC LIMIT :limit;

-- name: reminders_of_invoice
SELECT * FROM reminders WHERE invoice_id = :invoice_id ORDER BY stage;

-- name: unfinished_reminder_counts
-- Pending and in-doubt reminders per stage: the /metrics gauge reads only the partial index reminders_unfinished.
SELECT stage, state, COUNT(*) AS n FROM reminders WHERE state IN ('pending', 'in_doubt')
GROUP BY stage, state ORDER BY stage, state;

-- name: stripe_event_claim
-- The idempotency claim of one webhook event (G4's pattern): a replayed event id inserts nothing.
INSERT INTO stripe_events (id, type, invoice_number, created, received_at, outcome)
VALUES (:id, :type, :invoice_number, :created, :now, 'received')
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- name: stripe_event_finish
UPDATE stripe_events SET outcome = :outcome, detail = :detail WHERE id = :id;

-- name: list_stripe_events
SELECT * FROM stripe_events ORDER BY received_at, id;

-- name: upsert_customer_if_absent
INSERT INTO customers (email, name, locale, tz) VALUES (:email, :name, :locale, :tz)
ON CONFLICT (email) DO NOTHING;

-- name: insert_invoice_if_absent
INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, paid_at,
                      updated_at)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, :paid_on, :paid_at, :now)
ON CONFLICT (number) DO NOTHING
RETURNING id;

-- name: refresh_open_invoice
-- invoice.finalized for an invoice already known: amount and due date follow Stripe while it is open.
UPDATE invoices SET amount_due = :amount_due, due_on = :due_on, updated_at = :now
WHERE number = :number AND status = 'open'
RETURNING id;

-- name: transition_invoice
-- One of Stripe's forward transitions, only from the statuses that allow it (:from_a, :from_b): a late or
-- reordered event finds the invoice elsewhere and changes nothing.
UPDATE invoices SET status = :status, paid_on = :paid_on,
    paid_at = CASE WHEN :status = 'paid' THEN :now ELSE paid_at END,
    updated_at = :now
WHERE number = :number AND status IN (:from_a, :from_b)
RETURNING id;

-- name: customer_zones
-- The zones of customers with open invoices (a customer without one counts in :default_tz).
SELECT DISTINCT COALESCE(NULLIF(c.tz, ''), :default_tz) AS tz
FROM customers c WHERE EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = c.id AND i.status = 'open');
