-- The notices' queries (oncebeat.reminders.notices): what a statement of account lists, and the attachments a
-- reminder's frozen message carries (kept after the effect drops its frozen bytes, for the dashboard).

-- name: statement_invoices
-- A customer's open invoices for a statement: oldest due first within each currency.
SELECT i.number, i.currency, i.amount_due, i.issued_on, i.due_on
FROM invoices i JOIN customers c ON c.id = i.customer_id
WHERE c.email = :email AND i.status = 'open'
ORDER BY i.currency, i.due_on, i.number;

-- name: record_reminder_attachment
-- The n-th attachment of reminder :reminder_id's frozen message; the same again (a retry) changes nothing.
INSERT INTO reminder_attachments (reminder_id, position, filename, content_type, size, sha256, content, recorded_at)
VALUES (:reminder_id, :position, :filename, :content_type, :size, :sha256, :content, :now)
ON CONFLICT (reminder_id, position) DO NOTHING;

-- name: forget_reminder_attachments
-- The files recorded on reminder :reminder_id from a frozen message that never reached the server (a grouped
-- notice broken up before delivery): the row goes out in a message of its own, which records its own files.
DELETE FROM reminder_attachments WHERE reminder_id = :reminder_id;

-- name: notice_row_still_listed
-- Reminder :reminder_id if grouped notice :notice_id still lists it, pending: the files of that notice's frozen
-- message are recorded on it only then (a stalled attempt must not record them after a later attempt broke the
-- notice up). SQLite runs every write transaction alone; postgres/notices.sql locks the row.
SELECT id FROM reminders WHERE id = :reminder_id AND notice_id = :notice_id AND state = 'pending';

-- name: reminder_attachments_of_invoice
-- Every attachment of the invoice's reminders, without their bytes (the invoice page lists them).
SELECT a.reminder_id, a.position, a.filename, a.content_type, a.size, a.sha256, a.recorded_at
FROM reminder_attachments a JOIN reminders r ON r.id = a.reminder_id
WHERE r.invoice_id = :invoice_id ORDER BY a.reminder_id, a.position;

-- name: reminder_attachment
-- One attachment with its bytes (the dashboard's download).
SELECT reminder_id, position, filename, content_type, size, sha256, content
FROM reminder_attachments WHERE reminder_id = :reminder_id AND position = :position;

-- name: reminder_attachment_digests
-- Every recorded attachment's SHA-256, by reminder and position (the simulator's checker compares deliveries).
SELECT reminder_id, position, sha256 FROM reminder_attachments ORDER BY reminder_id, position;
