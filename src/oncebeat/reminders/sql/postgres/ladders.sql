-- The ladder queries whose SQL differs on PostgreSQL (the others: common/ladders.sql).

-- name: ladder_versions_by_id
SELECT id, name, version, content_hash, settings, created_at FROM ladder_versions
WHERE id = ANY(CAST(:ids AS bigint[]));

-- name: unpinned_open_invoices
SELECT i.id, i.number AS invoice_number, i.currency, i.amount_due, i.due_on, c.email AS customer_email,
       c.name AS customer_name, c.locale AS customer_locale, c.tz AS customer_tz, c.country AS customer_country,
       c.tags AS customer_tags
FROM invoices i JOIN customers c ON c.id = i.customer_id
WHERE i.status = 'open' AND i.ladder_version_id IS NULL AND i.due_on <= CAST(:max_cutoff AS date);

-- name: pin_open_invoices
UPDATE invoices SET ladder_version_id = CAST(:version_id AS bigint)
WHERE status = 'open' AND ladder_version_id IS NULL AND due_on <= CAST(:cutoff AS date);
