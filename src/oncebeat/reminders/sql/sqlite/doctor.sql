-- The reminder app's doctor queries whose SQL differs on SQLite (the others: common/doctor.sql); the same
-- names as postgres/doctor.sql. Lists arrive as JSON text and are read with json_each().

-- name: doctor_pending_reminders
SELECT r.*, i.number, i.status AS invoice_status,
       (SELECT j.id FROM jobs j
        WHERE j.unique_key = 'reminder:' || r.id AND j.state IN ('available', 'scheduled', 'running', 'retryable')
        ORDER BY j.id DESC LIMIT 1) AS open_job_id
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.state IN ('pending', 'deferred')  -- deferred by the cap (0013): not final, its send job snoozed
ORDER BY r.created_at, r.id;

-- name: doctor_reminders_of_invoices
SELECT r.*, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE i.number IN (SELECT value FROM json_each(:numbers))
ORDER BY r.invoice_id, r.stage;

-- name: doctor_reminders_by_ids
SELECT r.*, i.number FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE r.id IN (SELECT value FROM json_each(:ids))
ORDER BY r.id;
