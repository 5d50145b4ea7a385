-- The hold queries whose SQL differs on PostgreSQL (the others: common/holds.sql): NULL-able parameters are cast.

-- name: release_hold
-- A release ends the hold on the business day after the release (resumes_on), never later than it already
-- ends (a promise released after its date keeps its own end).
UPDATE reminder_holds SET released_at = :now, released_by = :released_by, release_note = :note,
    resumes_on = CASE WHEN resumes_on IS NULL OR resumes_on > CAST(:resumes_on AS DATE)
                      THEN CAST(:resumes_on AS DATE) ELSE resumes_on END
WHERE id = :id AND released_at IS NULL
RETURNING id;

-- name: covering_hold
-- The oldest hold covering invoice :invoice_id on :business_date, with the reason text a held reminder keeps.
SELECT h.id, h.reason, h.promise_until,
       'held: ' || CASE WHEN h.reason = 'promise' THEN 'promise to pay until ' || CAST(h.promise_until AS TEXT)
                        ELSE h.reason END || ' (hold ' || CAST(h.id AS TEXT) || ')' AS reason_text
FROM reminder_holds h JOIN invoices i ON i.id = CAST(:invoice_id AS BIGINT)
WHERE (h.invoice_id = i.id OR h.customer_id = i.customer_id)
  AND (h.resumes_on IS NULL OR CAST(:business_date AS DATE) < h.resumes_on)
ORDER BY h.id LIMIT 1;
