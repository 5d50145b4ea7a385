-- Queries of the overdue-invoice domain (the oncebeat.reminders package), written once for both backends.
-- sqlite/reminders.sql and postgres/reminders.sql hold only the blocks that differ (each replaces the block of
-- the same name here, or has no common form). Parameters are :name.

-- name: upsert_customer
-- The merge rule of every source (oncebeat.reminders.records.customer_params): a field the source does not carry
-- (:name, :locale, :tz, :country, :tags NULL) keeps the stored value; a new customer gets the new_ values.
-- name_folded (0024): the name's fold (oncebeat.reminders.names.fold_name) written with it, :name_folded with
-- :name, :new_name_folded with :new_name.
INSERT INTO customers (email, name, locale, tz, country, tags, name_folded)
VALUES (:email, :new_name, :new_locale, :new_tz, :new_country, :new_tags, :new_name_folded)
ON CONFLICT (email) DO UPDATE SET name = COALESCE(:name, customers.name), locale = COALESCE(:locale, customers.locale),
    name_folded = CASE WHEN CAST(:name AS text) IS NULL THEN customers.name_folded ELSE :name_folded END,
    tz = COALESCE(:tz, customers.tz), country = COALESCE(:country, customers.country),
    tags = COALESCE(:tags, customers.tags);

-- name: upsert_invoice
-- An invoice's fields from an import: a new invoice is inserted with its status; a known one gets the row's
-- customer, amount and dates (and a corrected payment date while both say paid), never its status: that moves
-- only through move_invoice_status (the transition rule). entered_at: when the invoice first entered oncebeat
-- (the insert; the update never changes it).
-- payment_url: :payment_url_given 0 when the source does not carry it (the stored one is kept), else the value
-- (NULL for an explicit empty one, which clears it).
-- payment_source (0020): the source writing the row ('csv', 'api', 'sql NAME'), NULL keeps the stored one.
INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, updated_at,
                      entered_at, payment_url, pdf_path, payment_source)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, :paid_on, :now, :now, CAST(:payment_url AS text),
        CAST(:pdf_path AS text), CAST(:payment_source AS text))
ON CONFLICT (number) DO UPDATE SET
    payment_source = COALESCE(excluded.payment_source, invoices.payment_source),
    customer_id = excluded.customer_id, currency = excluded.currency, amount_due = excluded.amount_due,
    issued_on = excluded.issued_on, due_on = excluded.due_on,
    payment_url = CASE WHEN CAST(:payment_url_given AS integer) = 1 THEN excluded.payment_url
                       ELSE invoices.payment_url END,
    pdf_path = CASE WHEN CAST(:pdf_path_given AS integer) = 1 THEN excluded.pdf_path ELSE invoices.pdf_path END,
    paid_on = CASE WHEN invoices.status = 'paid' AND excluded.status = 'paid' THEN excluded.paid_on
                   ELSE invoices.paid_on END,
    updated_at = excluded.updated_at;

-- name: move_invoice_status
-- THE status transition rule (README "Invoice status", oncebeat.reminders.records), for every source: an
-- import, a payment, a webhook. Forward moves only: open -> paid, void or uncollectible; uncollectible -> paid
-- or void. A recorded payment is undone only by an explicit reopen: :reopen (--reopen), or a row saying open
-- with a :status_on after the payment date (a refund or chargeback the books date). Everything else (a late or
-- reordered event, an old export, a processor's automatic status after a payment) changes nothing. Checked on
-- the row as it is when updated, so a payment committed concurrently is never overwritten. No RETURNING: it runs
-- as a batch (executemany), and the callers read the states before and after.
UPDATE invoices SET status = :status, paid_on = :paid_on,
    paid_at = CASE WHEN :status = 'paid' THEN :now ELSE NULL END, updated_at = :now
WHERE number = :number AND status <> :status
  AND (status = 'open'
       OR (status = 'uncollectible' AND :status IN ('paid', 'void'))
       OR (status = 'paid' AND :status = 'open' AND :status_on > paid_on)
       OR :reopen);

-- name: scan_probe_plan
-- PostgreSQL turns sequential scans off around the scan's inserts (postgres/reminders.sql says why); SQLite's
-- planner probes reminders by its (invoice_id, stage) index whatever ANALYZE recorded: nothing to set.
SELECT CAST(:on AS INTEGER) AS enable_seqscan;

-- name: scan_lock
-- Scans run one at a time. Nothing to take here: on SQLite every write transaction already runs alone (BEGIN
-- IMMEDIATE); postgres/reminders.sql takes an advisory lock instead.
SELECT 1 AS locked;

-- name: get_reminder_for_send
-- resumed_*: the hold this reminder is the first after (reminders 0009), for the template's promise_missed.
-- ladder_version_id: the ladder version it was created under (its templates and sender; reminders 0014).
-- The send job's other checks ride along, so a send reads once (issue 27: each read was a round trip):
-- covering_hold_id, the oldest hold covering the invoice on the reminder's business date (the covering_hold
-- query's rule); payment_processing_since (Stripe); effect_state, the ledger state of the reminder's effect key
-- (reminder:<id>; NULL: never claimed).
SELECT r.id, r.stage, r.state, r.business_date, r.occurrence_id, r.message_id, r.deferred_since, r.hold_id,
       r.resumes_hold_id, h.reason AS resumed_reason, h.promise_until AS resumed_promise_until,
       h.released_at AS resumed_released_at,
       i.id AS invoice_id, i.number, i.currency, i.amount_due, i.issued_on, i.due_on, i.status, i.paid_on,
       i.payment_url, i.pdf_path, c.email, c.name, c.locale, c.tz, r.ladder_version_id,
       i.payment_processing_since,
       (SELECT ch.id FROM reminder_holds ch
        WHERE (ch.invoice_id = i.id OR ch.customer_id = i.customer_id)
          AND (ch.resumes_on IS NULL OR r.business_date < ch.resumes_on)
        ORDER BY ch.id LIMIT 1) AS covering_hold_id,
       (SELECT e.state FROM effects e WHERE e.key = 'reminder:' || CAST(r.id AS TEXT)) AS effect_state
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
UPDATE reminders SET state = 'pending', reason = :reason, deferred_since = NULL, cap_day = NULL, updated_at = :now
WHERE state = 'failed' AND updated_at >= :since
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.key = 'reminder:' || CAST(reminders.id AS text)
                  AND e.state IN ('done', 'in_doubt', 'started'))
RETURNING id;

-- name: list_reminders
SELECT r.*, i.number, i.due_on, i.status AS invoice_status, i.paid_on
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
ORDER BY r.id;

-- name: list_invoices
SELECT i.*, p.ladder_version_id, c.email, c.name, c.locale, c.tz AS customer_tz, c.country AS customer_country, c.tags AS customer_tags
FROM invoices i JOIN customers c ON c.id = i.customer_id
     LEFT JOIN invoice_pins p ON p.invoice_id = i.id ORDER BY i.id;

-- name: count_invoices
SELECT status, COUNT(*) AS n FROM invoices GROUP BY status ORDER BY status;

-- name: pending_reminders
SELECT r.id, r.stage, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.state = 'pending' ORDER BY r.id;

-- Read verbs of the reminder app for operators (dashboard). Each reads a unique or foreign-key index.

-- name: invoice_by_number
SELECT i.*, p.ladder_version_id, c.email, c.name, c.locale, c.tz AS customer_tz, c.country AS customer_country, c.tags AS customer_tags
FROM invoices i JOIN customers c ON c.id = i.customer_id
     LEFT JOIN invoice_pins p ON p.invoice_id = i.id WHERE i.number = :number;

-- name: invoices_of_email
SELECT i.*, p.ladder_version_id, c.email, c.name, c.locale, c.tz AS customer_tz, c.country AS customer_country, c.tags AS customer_tags
FROM customers c JOIN invoices i ON i.customer_id = c.id
     LEFT JOIN invoice_pins p ON p.invoice_id = i.id
WHERE c.email = :email ORDER BY i.id DESC LIMIT :limit;

-- name: reminders_of_invoice
SELECT * FROM reminders WHERE invoice_id = :invoice_id ORDER BY stage;

-- name: unfinished_reminder_counts
-- Pending and in-doubt reminders per stage: the /metrics gauge reads only the partial index reminders_unfinished.
SELECT stage, state, COUNT(*) AS n FROM reminders WHERE state IN ('pending', 'in_doubt', 'deferred')
GROUP BY stage, state ORDER BY stage, state;

-- name: reminders_waiting_on_outage
-- Pending reminders waiting out a mail outage (their first refusal kept in deferred_since): how many, and the
-- oldest refusal, for the /metrics gauges an outage alert reads (the partial index reminders_unfinished).
SELECT COUNT(*) AS n FROM reminders WHERE state = 'pending' AND deferred_since IS NOT NULL;

-- name: oldest_outage_refusal
SELECT deferred_since FROM reminders WHERE state = 'pending' AND deferred_since IS NOT NULL
ORDER BY deferred_since LIMIT 1;

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

-- name: insert_invoice_if_absent
-- A Stripe webhook's new invoice: its payment data comes from Stripe (payment_source, 0020).
INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, paid_at,
                      updated_at, entered_at, payment_source)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, :paid_on, :paid_at, :now, :now, 'stripe')
ON CONFLICT (number) DO NOTHING
RETURNING id;

-- name: refresh_open_invoice
-- invoice.finalized for an invoice already known: amount and due date follow Stripe while it is open.
UPDATE invoices SET amount_due = :amount_due, due_on = :due_on, updated_at = :now
WHERE number = :number AND status = 'open'
RETURNING id;

-- name: customer_zones
-- The zones of customers with open invoices (a customer without one counts in :default_tz).
SELECT DISTINCT COALESCE(NULLIF(c.tz, ''), :default_tz) AS tz
FROM customers c WHERE EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = c.id AND i.status = 'open');

-- name: reminders_page
-- A keyset page of reminders (HTTP API), oldest first after id :after_id: optionally of invoice :number, of the
-- customer :email (lower-cased) and in state :state. Each filter reads an index (invoices.number, customers.email,
-- reminders (invoice_id, stage)); without one the primary key is walked in order.
SELECT r.id, r.stage, r.state, r.reason, r.business_date, r.message_id, r.created_at, r.updated_at, r.sent_at,
       r.deferred_since, r.superseded_stages, r.occurrence_id, r.notice_id, i.number, c.email
FROM reminders r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE r.id > :after_id
  AND (CAST(:number AS text) IS NULL OR i.number = :number)
  AND (CAST(:email AS text) IS NULL OR c.email = :email)
  AND (CAST(:state AS text) IS NULL OR r.state = :state)
ORDER BY r.id
LIMIT :limit;

-- name: latest_outage_refusal
-- The newest refusal of a reminder still waiting out a mail outage (its reason is the server's last answer).
SELECT reason, updated_at FROM reminders WHERE state = 'pending' AND deferred_since IS NOT NULL
ORDER BY updated_at DESC, id DESC LIMIT 1;

-- name: outage_next_try
-- When the first reminder waiting out a mail outage is tried again: the run_at of its unfinished send job (the
-- scan enqueues it with unique key reminder:<id>; jobs_unique_key finds it).
SELECT j.run_at FROM reminders r JOIN jobs j ON j.unique_key = 'reminder:' || CAST(r.id AS text)
WHERE r.state = 'pending' AND r.deferred_since IS NOT NULL AND j.state IN ('available', 'scheduled', 'retryable')
ORDER BY j.run_at LIMIT 1;

-- name: customers_named_like
-- At most :limit customers whose stored fold matches :pattern (oncebeat.reminders.names.like_pattern: '%needle%'
-- with %, _ and \ escaped), in no particular order: no ORDER BY, so a scan stops at :limit matches instead of
-- walking every customer to sort them (the page shows their invoices newest first). On PostgreSQL the trigram
-- index customers_name_trigram (0024) when pg_trgm is installed; a needle under three characters has no trigram
-- and scans name_folded until :limit match.
SELECT id FROM customers WHERE name_folded LIKE :pattern ESCAPE '\' LIMIT :limit;

-- name: customers_unfolded_after
-- A keyset page of the customers whose name has no stored fold yet (partial index customers_unfolded: none once
-- backfilled): the search folds them in Python, the backfill stores their folds.
SELECT id, name FROM customers WHERE name_folded IS NULL AND id > :after_id ORDER BY id LIMIT :limit;

-- name: store_folded_name
-- The fold of a customer's name, stored only while the name is still the one folded (a rename meanwhile keeps
-- the row unfolded for a later backfill).
UPDATE customers SET name_folded = :name_folded WHERE id = :id AND name = :name;


-- name: reminders_sent_since
-- The reminders sent at or after :since (UTC), newest first, at most :limit (the Reminders page's "sent today").
-- Reads reminders_sent_at (reminders migration 0016). notice_id: the grouped notice it went out in (0017), or NULL.
SELECT r.id, r.stage, r.sent_at, r.message_id, r.notice_id, i.number, i.currency, i.amount_due, c.name, c.email
FROM reminders r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE r.state = 'sent' AND r.sent_at >= :since
ORDER BY r.sent_at DESC, r.id DESC LIMIT :limit;

-- name: invoice_open_totals_last
-- The last row of invoice_open_totals (reminders 0022): the scan's daily fold sums the rows up to it.
SELECT MAX(id) AS id FROM invoice_open_totals;

-- name: invoice_open_totals_drop
-- After SQLite's invoice_open_totals_fold: the rows it summed (PostgreSQL's fold deletes them itself).
DELETE FROM invoice_open_totals WHERE id <= :upto;
