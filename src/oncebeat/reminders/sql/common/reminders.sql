-- Queries of the overdue-invoice domain (the oncebeat.reminders package), written once for both backends.
-- sqlite/reminders.sql and postgres/reminders.sql hold only the blocks that differ (each replaces the block of
-- the same name here, or has no common form). Parameters are :name.

-- name: upsert_customer
INSERT INTO customers (email, name, locale, tz) VALUES (:email, :name, :locale, :tz)
ON CONFLICT (email) DO UPDATE SET name = excluded.name, locale = excluded.locale, tz = excluded.tz;

-- name: upsert_invoice
-- A paid invoice is never reopened by a row without newer payment information (G6): it stays paid unless the
-- row's status_on is after the payment, or :reopen (--reopen) says so. paid_at records when it became paid here;
-- entered_at when the invoice first entered oncebeat (the insert; the update never changes it).
INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, updated_at,
                      entered_at)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, :paid_on, :now, :now)
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

-- name: mark_paid
UPDATE invoices SET status = 'paid', paid_on = :paid_on, paid_at = :now, updated_at = :now
WHERE number = :number AND status = 'open'
RETURNING id;

-- name: scan_lock
-- Scans run one at a time. Nothing to take here: on SQLite every write transaction already runs alone (BEGIN
-- IMMEDIATE); postgres/reminders.sql takes an advisory lock instead.
SELECT 1 AS locked;

-- name: get_reminder_for_send
-- resumed_*: the hold this reminder is the first after (reminders 0009), for the template's promise_missed.
SELECT r.id, r.stage, r.state, r.business_date, r.occurrence_id, r.message_id, r.deferred_since, r.hold_id,
       r.resumes_hold_id, h.reason AS resumed_reason, h.promise_until AS resumed_promise_until,
       h.released_at AS resumed_released_at,
       i.id AS invoice_id, i.number, i.currency, i.amount_due, i.issued_on, i.due_on, i.status, i.paid_on,
       c.email, c.name, c.locale, c.tz
FROM reminders r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
LEFT JOIN reminder_holds h ON h.id = r.resumes_hold_id
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
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.key = 'reminder:' || CAST(reminders.id AS text)
                  AND e.state IN ('done', 'in_doubt', 'started'))
RETURNING id;

-- name: list_reminders
SELECT r.*, i.number, i.due_on, i.status AS invoice_status, i.paid_on
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
ORDER BY r.id;

-- name: list_invoices
SELECT i.*, c.email, c.name, c.locale, c.tz AS customer_tz
FROM invoices i JOIN customers c ON c.id = i.customer_id ORDER BY i.id;

-- name: count_invoices
SELECT status, COUNT(*) AS n FROM invoices GROUP BY status ORDER BY status;

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
                      updated_at, entered_at)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, :paid_on, :paid_at, :now, :now)
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
