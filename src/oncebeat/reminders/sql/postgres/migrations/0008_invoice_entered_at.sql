-- 0008 (reminders line): when an invoice entered oncebeat (issue 21 item 4), so `check` holds a scan accountable
-- for an invoice only if the invoice was in the database when that scan ran: an invoice imported (CSV, Stripe
-- import or webhook) between two scans was never seen by the earlier one, and its reminders are not lost there.
--
-- invoices.entered_at: the UTC instant the invoice's row was first inserted (upsert_invoice,
-- insert_invoice_if_absent); an upsert of a known invoice never changes it. NULL: inserted by hand (not through
-- oncebeat), counted as present since before every scan.
ALTER TABLE invoices ADD COLUMN entered_at TIMESTAMPTZ;

-- Existing rows: the earliest instant the database shows the invoice existed: its first reminder's creation,
-- the instant it was marked paid here, or its last write (updated_at). An invoice may have arrived earlier than
-- that; `check` then holds fewer scans accountable for it, never a scan that could not have seen it.
UPDATE invoices i SET entered_at = LEAST(
    i.updated_at, i.paid_at, (SELECT MIN(r.created_at) FROM reminders r WHERE r.invoice_id = i.id));
