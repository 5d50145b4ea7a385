-- The ladder queries whose SQL differs on PostgreSQL (the others: common/ladders.sql).

-- name: ladder_versions_by_id
SELECT id, name, version, content_hash, settings, created_at FROM ladder_versions
WHERE id = ANY(CAST(:ids AS bigint[]));

-- name: unpinned_open_invoices
SELECT i.id, i.number AS invoice_number, i.currency, i.amount_due, i.due_on, c.email AS customer_email,
       c.name AS customer_name, c.locale AS customer_locale, c.tz AS customer_tz, c.country AS customer_country,
       c.tags AS customer_tags
FROM invoices i JOIN customers c ON c.id = i.customer_id
WHERE i.status = 'open' AND i.due_on <= CAST(:max_cutoff AS date)
  AND NOT EXISTS (SELECT 1 FROM invoice_pins p WHERE p.invoice_id = i.id);

-- name: pin_open_invoices
-- One narrow row per invoice (reminders 0021): the invoice row and its seven indexes are not written.
INSERT INTO invoice_pins (invoice_id, ladder_version_id)
SELECT i.id, CAST(:version_id AS bigint) FROM invoices i
WHERE i.status = 'open' AND i.due_on <= CAST(:cutoff AS date)
  AND NOT EXISTS (SELECT 1 FROM invoice_pins p WHERE p.invoice_id = i.id)
ON CONFLICT (invoice_id) DO NOTHING;
