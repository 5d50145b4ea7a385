-- The cap queries whose SQL differs on PostgreSQL (the others: common/capfence.sql).

-- name: cap_lock_customer
-- Counting and claiming places under one customer's cap run one at a time: the customer's row is locked until
-- the transaction ends (READ COMMITTED: the count that follows sees every claim committed before the lock).
SELECT c.id AS customer_id FROM customers c WHERE c.id = (SELECT customer_id FROM invoices WHERE id = :invoice_id)
FOR UPDATE;

-- name: cap_lock_customer_id
-- As cap_lock_customer, for a grouped notice (which names its customer).
SELECT c.id AS customer_id FROM customers c WHERE c.id = :customer_id FOR UPDATE;

-- name: cap_counted
SELECT r.id, r.cap_day, COALESCE(r.sent_at, r.updated_at) AS at, r.notice_id
FROM reminders r JOIN invoices i ON i.id = r.invoice_id
WHERE i.customer_id = :customer_id AND r.id <> :id
  AND (r.notice_id IS NULL OR r.notice_id <> :notice_id)
  AND ((r.cap_day IS NOT NULL AND r.cap_day >= CAST(:since AS DATE) AND r.state IN ('pending', 'sent', 'in_doubt'))
       OR (r.cap_day IS NULL AND r.state IN ('sent', 'in_doubt')
           AND COALESCE(r.sent_at, r.updated_at) >= CAST(:since_at AS TIMESTAMPTZ)));

-- name: payment_processing_mark
UPDATE invoices SET payment_processing_since = CAST(:now AS TIMESTAMPTZ) WHERE number = :number
RETURNING id;

-- name: invoice_payment_sources
-- The payment source of each invoice in :ids (NULL: written before reminders 0020), for the freshness fence.
SELECT id, payment_source FROM invoices WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id;
