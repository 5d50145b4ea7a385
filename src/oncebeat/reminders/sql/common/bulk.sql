-- The staging tables of a streaming import (oncebeat.reminders.bulk). Both are temporary (private to the
-- import's connection), created and dropped inside the import's one transaction: a failed or refused import
-- rolls them back with everything else. postgres/bulk.sql and sqlite/bulk.sql hold the DDL.

-- name: bulk_stage_row
INSERT INTO oncebeat_import_rows (line, bad, number, email, name, x_locale, x_tz, currency, amount_due, issued_on,
                                  due_on, status, paid_on, status_on, paid_at, hold_reason, promise_until, hold_note,
                                  x_payment_url, x_pdf_path, x_country, x_tags)
VALUES (:line, :bad, :number, :email, :name, :x_locale, :x_tz, :currency, :amount_due, :issued_on, :due_on, :status,
        :paid_on, :status_on, :paid_at, :hold_reason, :promise_until, :hold_note, :x_payment_url, :x_pdf_path,
        :x_country, :x_tags);

-- name: bulk_stage_problem
INSERT INTO oncebeat_import_problems (seq, line, text) VALUES (:seq, :line, :text);

-- name: bulk_mark_bad
UPDATE oncebeat_import_rows SET bad = TRUE WHERE line = :line;

-- name: bulk_index_numbers
CREATE INDEX oncebeat_import_rows_number ON oncebeat_import_rows (number, line);

-- name: bulk_index_emails
CREATE INDEX oncebeat_import_rows_email ON oncebeat_import_rows (email, line);

-- name: bulk_shared_numbers
-- The rows whose invoice number another row has too, by number then line, the page after (:after_number,
-- :after_line): the duplicates rule reads them in order.
SELECT number, line FROM oncebeat_import_rows r
WHERE number IS NOT NULL AND (number > :after_number OR (number = :after_number AND line > :after_line))
  AND EXISTS (SELECT 1 FROM oncebeat_import_rows o WHERE o.number = r.number AND o.line <> r.line)
ORDER BY number, line LIMIT :page;

-- name: bulk_customer_rows
-- Rows with a valid email and a name, by email then line, the page after (:after_email, :after_line).
SELECT email, line, name, x_locale, x_tz, x_country, x_tags, bad FROM oncebeat_import_rows
WHERE email IS NOT NULL AND name IS NOT NULL
  AND (email > :after_email OR (email = :after_email AND line > :after_line))
ORDER BY email, line LIMIT :page;

-- name: bulk_valid_count
SELECT COUNT(*) AS n FROM oncebeat_import_rows WHERE NOT bad;

-- name: bulk_valid_rows
SELECT line, number, email, currency, amount_due, issued_on, due_on, status, paid_on, status_on, hold_reason,
       promise_until, hold_note, x_payment_url, x_pdf_path
FROM oncebeat_import_rows WHERE NOT bad AND line > :after_line ORDER BY line LIMIT :page;

-- name: bulk_unpayable
-- Payments without a problem of their own that name an unknown invoice or predate its issue, the page after
-- :after_line.
SELECT r.line, r.number, r.paid_on, i.issued_on, i.id AS invoice_id
FROM oncebeat_import_rows r LEFT JOIN invoices i ON i.number = r.number
WHERE NOT r.bad AND r.line > :after_line AND (i.id IS NULL OR r.paid_on < i.issued_on)
ORDER BY r.line LIMIT :page;

-- name: bulk_valid_payments
-- The valid payments, by line, the page after :after_line (each goes through move_invoice_status).
SELECT line, number, paid_on FROM oncebeat_import_rows WHERE NOT bad AND line > :after_line ORDER BY line LIMIT :page;

-- name: bulk_problem_count
SELECT COUNT(*) AS problems, COUNT(DISTINCT line) AS lines FROM oncebeat_import_problems;

-- name: bulk_problems
-- Every problem by line, in the order found, the page after (:after_line, :after_seq).
SELECT seq, line, text FROM oncebeat_import_problems
WHERE line > :after_line OR (line = :after_line AND seq > :after_seq)
ORDER BY line, seq LIMIT :page;
