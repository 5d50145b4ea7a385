-- Late fees (oncebeat.reminders.notices.fees, reminders migration 0018): one per (invoice, stage), written in the
-- transaction that records the stage's reminder sent; read by the fees report, evidence and the checker.

-- name: record_fee
-- The fee of reminder :reminder_id, only if it is sent; a second one for its (invoice, stage) is dropped by the key.
INSERT INTO reminder_fees (invoice_id, stage, reminder_id, amount, currency, basis, rule, created_at)
SELECT r.invoice_id, r.stage, r.id, :amount, :currency, :basis, :rule, :now
FROM reminders r WHERE r.id = :reminder_id AND r.state = 'sent'
ON CONFLICT (invoice_id, stage) DO NOTHING
RETURNING invoice_id;

-- name: fees_between
-- Fees recorded at or after :since and before :until (the export a team posts to its ledger), oldest first.
SELECT f.invoice_id, i.number, c.name AS customer_name, c.email AS customer_email, f.stage, f.amount, f.currency,
       f.basis, f.rule, f.reminder_id, r.message_id, f.created_at
FROM reminder_fees f JOIN invoices i ON i.id = f.invoice_id JOIN customers c ON c.id = i.customer_id
JOIN reminders r ON r.id = f.reminder_id
WHERE f.created_at >= :since AND f.created_at < :until
ORDER BY f.created_at, i.number, f.stage;

-- name: fees_of_invoice
-- The fees of one invoice by stage (its proof of notice and the invoice page).
SELECT stage, amount, currency, basis, rule, reminder_id, created_at
FROM reminder_fees WHERE invoice_id = :invoice_id ORDER BY stage;

-- name: all_fees
-- Every fee with its invoice's number (the simulator's checker compares them with the rules).
SELECT f.invoice_id, i.number, f.stage, f.amount, f.currency, f.basis, f.reminder_id
FROM reminder_fees f JOIN invoices i ON i.id = f.invoice_id ORDER BY i.number, f.stage;
