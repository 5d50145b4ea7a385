-- The freshness fence's queries whose SQL differs on SQLite (the others: common/capfence.sql). Lists arrive as
-- JSON text (json_each()).

-- name: invoice_payment_sources
-- The payment source of each invoice in :ids (NULL: written before reminders 0020), for the freshness fence.
SELECT id, payment_source FROM invoices WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;
