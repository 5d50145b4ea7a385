-- What-if (oncebeat.reminders.bookcopy, issue 23 item 6): the book streamed, page by page (keyset on id), out of the
-- live database (read only: nothing here writes to it) into a temporary SQLite copy, with the same ids so every
-- reference (invoice -> customer, reminder -> invoice and hold) holds; then the outcome of a simulated run read back
-- out of the copy, invoice by invoice. The copy* queries run on the copy only.

-- name: whatif_customers_page
SELECT id, email, name, locale, tz, country, tags FROM customers WHERE id > :after_id ORDER BY id LIMIT :limit;

-- name: whatif_ladder_versions_page
-- The recorded ladder versions (copied first: the invoices and reminders pinned to them refer to them).
SELECT id, name, version, content_hash, settings, created_at FROM ladder_versions WHERE id > :after_id
ORDER BY id LIMIT :limit;

-- name: whatif_invoices_page
-- ladder_version_id: the pin of an invoice already in dunning (copied, not re-matched; whatif_copy_pin), else NULL.
SELECT i.id, i.number, i.customer_id, i.currency, i.amount_due, i.issued_on, i.due_on, i.status, i.paid_on,
       i.updated_at, i.paid_at, i.entered_at, i.payment_url, p.ladder_version_id
FROM invoices i LEFT JOIN invoice_pins p ON p.invoice_id = i.id
WHERE i.id > :after_id ORDER BY i.id LIMIT :limit;

-- name: whatif_holds_page
SELECT id, invoice_id, customer_id, reason, promise_until, resumes_on, note, external_ref, created_by, created_at,
       released_at, released_by, release_note
FROM reminder_holds WHERE id > :after_id ORDER BY id LIMIT :limit;

-- name: whatif_reminders_page
SELECT id, invoice_id, stage, state, reason, business_date, message_id, created_at, updated_at, sent_at,
       deferred_since, superseded_stages, hold_id, resumes_hold_id, ladder_version_id
FROM reminders WHERE id > :after_id ORDER BY id LIMIT :limit;

-- name: whatif_copy_customer
-- name_folded (0024): the copy's fold of the name (oncebeat.reminders.names.fold_name), computed by the
-- copy (the source's may still be NULL).
INSERT INTO customers (id, email, name, locale, tz, country, tags, name_folded)
VALUES (:id, :email, :name, :locale, :tz, :country, :tags, :name_folded);

-- name: whatif_copy_ladder_version
INSERT INTO ladder_versions (id, name, version, content_hash, settings, created_at)
VALUES (:id, :name, :version, :content_hash, :settings, :created_at);

-- name: whatif_copy_invoice
INSERT INTO invoices (id, number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, updated_at,
                      paid_at, entered_at, payment_url)
VALUES (:id, :number, :customer_id, :currency, :amount_due, :issued_on, :due_on, :status, :paid_on, :updated_at,
        :paid_at, :entered_at, :payment_url);

-- name: whatif_copy_pin
-- The pin of a copied invoice (the pinned rows of a whatif_invoices_page).
INSERT INTO invoice_pins (invoice_id, ladder_version_id) VALUES (:id, :ladder_version_id);

-- name: whatif_copy_hold
INSERT INTO reminder_holds (id, invoice_id, customer_id, reason, promise_until, resumes_on, note, external_ref,
                            created_by, created_at, released_at, released_by, release_note)
VALUES (:id, :invoice_id, :customer_id, :reason, :promise_until, :resumes_on, :note, :external_ref, :created_by,
        :created_at, :released_at, :released_by, :release_note);

-- name: whatif_copy_reminder
-- occurrence_id is left NULL: the live database's occurrences are not copied (the copy's clock makes its own).
INSERT INTO reminders (id, invoice_id, stage, state, reason, occurrence_id, business_date, message_id, created_at,
                       updated_at, sent_at, deferred_since, superseded_stages, hold_id, resumes_hold_id,
                       ladder_version_id)
VALUES (:id, :invoice_id, :stage, :state, :reason, NULL, :business_date, :message_id, :created_at, :updated_at,
        :sent_at, :deferred_since, :superseded_stages, :hold_id, :resumes_hold_id, :ladder_version_id);

-- name: whatif_outcomes_page
-- The reminders a simulated run decided (touched at or after :t0), in (invoice_id, stage) order after the keyset
-- (:after_invoice, :after_stage), with the customer's zone and locale; in_dunning: the invoice had a reminder
-- before the run started (it was already in dunning in the live book).
SELECT r.invoice_id, r.stage, r.state, r.reason, r.business_date, r.sent_at, r.superseded_stages,
       i.number, i.customer_id, c.email, c.tz, c.locale,
       EXISTS (SELECT 1 FROM reminders r0 WHERE r0.invoice_id = r.invoice_id AND r0.created_at < :t0) AS in_dunning
FROM reminders r
JOIN invoices i ON i.id = r.invoice_id
JOIN customers c ON c.id = i.customer_id
WHERE r.updated_at >= :t0
  AND (r.invoice_id > :after_invoice OR (r.invoice_id = :after_invoice AND r.stage > :after_stage))
ORDER BY r.invoice_id, r.stage
LIMIT :limit;
