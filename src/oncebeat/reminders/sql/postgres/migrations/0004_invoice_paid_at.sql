-- reminders 0004 (0.1's 0008): when an invoice stopped being open in this database (UTC instant), so `check` replays payments
-- exactly as the scans saw them. NULL: paid before oncebeat knew the invoice, or before this column.
ALTER TABLE invoices ADD COLUMN paid_at TIMESTAMPTZ;
