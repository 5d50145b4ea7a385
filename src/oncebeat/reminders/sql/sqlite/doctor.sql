-- The reminder app's doctor queries whose SQL differs on SQLite (the others: common/doctor.sql); the same
-- names as postgres/doctor.sql. Lists arrive as JSON text and are read with json_each().

-- name: doctor_pending_reminders
-- open_job_id: its own send job, else (group = "customer", reminders 0017) the job of the notice that lists it
-- or, before that notice chose its rows, of the notice it joined (same customer, business date, ladder version).
SELECT r.*, i.number, i.status AS invoice_status,
       COALESCE((SELECT j.id FROM jobs j
        WHERE j.unique_key = 'reminder:' || r.id AND j.state IN ('available', 'scheduled', 'running', 'retryable')
        ORDER BY j.id DESC LIMIT 1),
       (SELECT j.id FROM notices n JOIN jobs j ON j.unique_key = 'notice:' || n.id
        WHERE (n.id = r.notice_id OR (r.notice_id IS NULL AND n.assigned_at IS NULL AND n.customer_id = i.customer_id
               AND n.business_date = r.business_date AND n.ladder_version_id = r.ladder_version_id))
          AND j.state IN ('available', 'scheduled', 'running', 'retryable')
        ORDER BY j.id DESC LIMIT 1)) AS open_job_id
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
