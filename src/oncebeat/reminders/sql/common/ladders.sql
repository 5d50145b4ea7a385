-- Ladder versions and pins (reminders migrations 0014, 0021), owned by oncebeat.reminders.pinning: a version per
-- change of a ladder's settings; an invoice pinned to the version it started dunning with (a row of invoice_pins).

-- name: ladder_versions_latest
-- The newest version of every ladder ever recorded.
SELECT v.id, v.name, v.version, v.content_hash, v.settings, v.created_at
FROM ladder_versions v
WHERE v.version = (SELECT MAX(w.version) FROM ladder_versions w WHERE w.name = v.name)
ORDER BY v.name;

-- name: insert_ladder_version
INSERT INTO ladder_versions (name, version, content_hash, settings, created_at)
VALUES (:name, :version, :content_hash, :settings, :now)
RETURNING id;

-- name: ladder_versions_by_id
-- Versions by id (:ids a list, JSON text on SQLite, an array on PostgreSQL: see the dialect files).
SELECT id, name, version, content_hash, settings, created_at FROM ladder_versions
WHERE id IN (SELECT CAST(value AS INTEGER) FROM json_each(:ids));

-- name: unpinned_open_invoices
-- Open invoices not in dunning yet whose due date is on or before :max_cutoff (the latest due date any ladder's
-- first stage can have reached), with the fields a ladder's rule can match (MATCH_COLUMNS).
SELECT i.id, i.number AS invoice_number, i.currency, i.amount_due, i.due_on, c.email AS customer_email,
       c.name AS customer_name, c.locale AS customer_locale, c.tz AS customer_tz, c.country AS customer_country,
       c.tags AS customer_tags
FROM invoices i JOIN customers c ON c.id = i.customer_id
WHERE i.status = 'open' AND i.due_on <= :max_cutoff
  AND NOT EXISTS (SELECT 1 FROM invoice_pins p WHERE p.invoice_id = i.id);

-- name: pin_invoice
-- Pin one invoice (a batch: executemany); an invoice pinned meanwhile keeps its pin.
INSERT INTO invoice_pins (invoice_id, ladder_version_id) VALUES (:id, :version_id)
ON CONFLICT (invoice_id) DO NOTHING;

-- name: open_ladder_versions
-- The versions open invoices are pinned to: the ladders the scan runs. Per version (a handful) its pins by index
-- invoice_pins_version until one is of an open invoice, not a pass over the open invoices.
SELECT v.id, v.name, v.version, v.settings FROM ladder_versions v
WHERE EXISTS (SELECT 1 FROM invoice_pins p JOIN invoices i ON i.id = p.invoice_id
              WHERE p.ladder_version_id = v.id AND i.status = 'open')
ORDER BY v.id;

-- name: ladder_holdings
-- Per ladder version: how many open invoices are pinned to it and how many invoices in all.
SELECT v.id, v.name, v.version, v.content_hash, v.created_at,
       COUNT(CASE WHEN i.status = 'open' THEN 1 END) AS open_invoices, COUNT(i.id) AS invoices
FROM ladder_versions v LEFT JOIN invoice_pins p ON p.ladder_version_id = v.id LEFT JOIN invoices i ON i.id = p.invoice_id
GROUP BY v.id, v.name, v.version, v.content_hash, v.created_at
ORDER BY v.name, v.version;

-- name: ladder_invoices
-- The invoices pinned to any version of ladder :name (open first), with the version, at most :limit.
SELECT i.number, i.status, i.due_on, v.version, v.id AS ladder_version_id
FROM invoices i JOIN invoice_pins p ON p.invoice_id = i.id JOIN ladder_versions v ON v.id = p.ladder_version_id
WHERE v.name = :name
ORDER BY CASE WHEN i.status = 'open' THEN 0 ELSE 1 END, i.number
LIMIT :limit;

-- name: open_invoices_on_old_versions
-- Open invoices pinned to a version of ladder :name other than :version_id (what an apply moves).
SELECT i.id, i.number, v.version, p.ladder_version_id
FROM invoices i JOIN invoice_pins p ON p.invoice_id = i.id JOIN ladder_versions v ON v.id = p.ladder_version_id
WHERE v.name = :name AND p.ladder_version_id <> :version_id AND i.status = 'open'
ORDER BY i.number;

-- name: repin_invoice
-- Move one open invoice (a batch) from version :from_id to :version_id; a changed pin or status is left alone.
UPDATE invoice_pins SET ladder_version_id = :version_id
WHERE invoice_id = :id AND ladder_version_id = :from_id
  AND EXISTS (SELECT 1 FROM invoices i WHERE i.id = invoice_pins.invoice_id AND i.status = 'open');

-- name: pin_open_invoices
-- With the default ladder only: pin at once every open invoice not in dunning whose due date is on or before
-- :cutoff (its first stage has come) to :version_id: one narrow row each (reminders 0021), the invoice untouched.
INSERT INTO invoice_pins (invoice_id, ladder_version_id)
SELECT i.id, :version_id FROM invoices i
WHERE i.status = 'open' AND i.due_on <= :cutoff AND NOT EXISTS (SELECT 1 FROM invoice_pins p WHERE p.invoice_id = i.id)
ON CONFLICT (invoice_id) DO NOTHING;

-- name: all_ladder_versions
SELECT id, name, version, content_hash, settings, created_at FROM ladder_versions ORDER BY id;
