-- Holds (table reminder_holds, reminders migration 0009): placed, released and listed by oncebeat.reminders.holds; the scan and the
-- send job ask whether one covers a reminder's business date. A hold covers business date D of an invoice when
-- it is on that invoice or on its customer and D < resumes_on (NULL: until released).

-- name: customer_by_email
SELECT id, email, name FROM customers WHERE email = :email;

-- name: invoice_for_hold
-- The invoice and the settings of the ladder version it is pinned to (its calendar decides when a hold ends).
SELECT i.id, i.number, i.status, i.customer_id, c.email, lv.settings AS ladder_settings
FROM invoices i JOIN customers c ON c.id = i.customer_id LEFT JOIN invoice_pins p ON p.invoice_id = i.id
     LEFT JOIN ladder_versions lv ON lv.id = p.ladder_version_id
WHERE i.number = :number;

-- name: insert_hold
INSERT INTO reminder_holds (invoice_id, customer_id, reason, promise_until, resumes_on, note, external_ref, created_by,
                   created_at)
VALUES (:invoice_id, :customer_id, :reason, :promise_until, :resumes_on, :note, :external_ref, :created_by, :now)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: release_hold
-- A release ends the hold on the business day after the release (resumes_on), never later than it already
-- ends (a promise released after its date keeps its own end).
UPDATE reminder_holds SET released_at = :now, released_by = :released_by, release_note = :note,
    resumes_on = CASE WHEN resumes_on IS NULL OR resumes_on > :resumes_on THEN :resumes_on ELSE resumes_on END
WHERE id = :id AND released_at IS NULL
RETURNING id;

-- name: get_hold
SELECT h.*, i.number, COALESCE(c.email, ic.email) AS email
FROM reminder_holds h LEFT JOIN invoices i ON i.id = h.invoice_id LEFT JOIN customers c ON c.id = h.customer_id
LEFT JOIN customers ic ON ic.id = i.customer_id
WHERE h.id = :id;

-- name: hold_by_external_ref
SELECT id, released_at FROM reminder_holds WHERE external_ref = :external_ref;

-- name: list_holds
SELECT h.*, i.number, COALESCE(c.email, ic.email) AS email
FROM reminder_holds h LEFT JOIN invoices i ON i.id = h.invoice_id LEFT JOIN customers c ON c.id = h.customer_id
LEFT JOIN customers ic ON ic.id = i.customer_id
ORDER BY h.id;

-- name: unreleased_holds_of_invoice
SELECT id FROM reminder_holds WHERE invoice_id = :invoice_id AND released_at IS NULL ORDER BY id;

-- name: unreleased_holds_of_customer
SELECT id FROM reminder_holds WHERE customer_id = :customer_id AND released_at IS NULL ORDER BY id;

-- name: holds_of_invoice
-- The holds on an invoice or on its customer (the dashboard's invoice page), oldest first.
SELECT h.* FROM reminder_holds h JOIN invoices i ON i.id = :invoice_id
WHERE h.invoice_id = i.id OR h.customer_id = i.customer_id
ORDER BY h.id;

-- name: any_hold
SELECT id FROM reminder_holds LIMIT 1;

-- name: hold_reminder
-- The send job found a hold covering a pending reminder before its email was claimed: recorded held, final.
UPDATE reminders SET state = 'held', hold_id = :hold_id, reason = :reason, updated_at = :now
WHERE id = :id AND state = 'pending'
RETURNING id;

-- name: scan_hold_reminders
-- The reminders this scan just created (created_at = :now, pending) whose invoice a hold covers on their business
-- date are recorded held, with the oldest covering hold's id and reason; they get no send job.
UPDATE reminders SET state = 'held',
    hold_id = (SELECT h.id FROM reminder_holds h JOIN invoices i ON i.id = reminders.invoice_id
               WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
                 AND (h.resumes_on IS NULL OR reminders.business_date < h.resumes_on)
               ORDER BY h.id LIMIT 1),
    reason = (SELECT 'held: ' || CASE WHEN h.reason = 'promise'
                                      THEN 'promise to pay until ' || CAST(h.promise_until AS TEXT)
                                      ELSE h.reason END || ' (hold ' || CAST(h.id AS TEXT) || ')'
              FROM reminder_holds h JOIN invoices i ON i.id = reminders.invoice_id
              WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
                AND (h.resumes_on IS NULL OR reminders.business_date < h.resumes_on)
              ORDER BY h.id LIMIT 1),
    updated_at = :now
WHERE state = 'pending' AND created_at = :now
  AND EXISTS (SELECT 1 FROM reminder_holds h JOIN invoices i ON i.id = reminders.invoice_id
              WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
                AND (h.resumes_on IS NULL OR reminders.business_date < h.resumes_on))
RETURNING id;

-- name: scan_mark_resumed
-- A reminder this scan created that is its invoice's first since a hold ended (no other reminder of the
-- invoice, except held ones, on or after the hold's resumes_on) records that hold: the email says a promise was
-- missed (promise_missed).
UPDATE reminders SET resumes_hold_id = (
    SELECT h.id FROM reminder_holds h JOIN invoices i ON i.id = reminders.invoice_id
    WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
      AND h.resumes_on IS NOT NULL AND h.resumes_on <= reminders.business_date
      AND NOT EXISTS (SELECT 1 FROM reminders p WHERE p.invoice_id = reminders.invoice_id AND p.id <> reminders.id
                      AND p.state <> 'held' AND p.business_date >= h.resumes_on)
    ORDER BY h.resumes_on DESC, h.id DESC LIMIT 1)
WHERE state = 'pending' AND created_at = :now AND resumes_hold_id IS NULL
  AND EXISTS (SELECT 1 FROM reminder_holds h JOIN invoices i ON i.id = reminders.invoice_id
              WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
                AND h.resumes_on IS NOT NULL AND h.resumes_on <= reminders.business_date)
RETURNING id, resumes_hold_id;

-- name: covering_hold
-- The oldest hold covering invoice :invoice_id on :business_date, with the reason text a held reminder keeps.
SELECT h.id, h.reason, h.promise_until,
       'held: ' || CASE WHEN h.reason = 'promise' THEN 'promise to pay until ' || CAST(h.promise_until AS TEXT)
                        ELSE h.reason END || ' (hold ' || CAST(h.id AS TEXT) || ')' AS reason_text
FROM reminder_holds h JOIN invoices i ON i.id = :invoice_id
WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
  AND (h.resumes_on IS NULL OR :business_date < h.resumes_on)
ORDER BY h.id LIMIT 1;
