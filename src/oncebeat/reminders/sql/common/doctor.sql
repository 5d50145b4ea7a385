-- Read-only queries of the reminder app's doctor checks (oncebeat.reminders.doctor), written once for both
-- backends; <backend>/doctor.sql holds the blocks whose SQL differs (lists, casts).

-- name: doctor_failed_reminders
SELECT r.*, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.state = 'failed' AND r.updated_at >= :since
ORDER BY r.updated_at, r.id;

-- name: doctor_deferred_reminders
-- Pending reminders waiting out a mail outage that began before :before.
SELECT r.*, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.state = 'pending' AND r.deferred_since < :before
ORDER BY r.deferred_since, r.id;

-- name: doctor_invoice
SELECT i.*, p.ladder_version_id, c.email, c.name, c.tz AS customer_tz
FROM invoices i JOIN customers c ON c.id = i.customer_id
     LEFT JOIN invoice_pins p ON p.invoice_id = i.id
WHERE i.number = :number;

-- name: doctor_reminders_of_occurrence
SELECT r.*, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.occurrence_id = :occurrence_id
ORDER BY r.id;
