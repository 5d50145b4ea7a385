-- reminders 0020: the source an invoice's payment data comes from (issue 23 item 5), the one that last wrote the
-- invoice: 'csv' (an import), 'stripe' (a webhook or sync), 'api' (the HTTP API), 'sql NAME' (the SQL source of
-- that name, as in source_reads). Its send waits while THAT source's watermark is older than
-- max_payment_staleness. NULL for invoices written before 0020: they keep the freshest source's watermark.
ALTER TABLE invoices ADD COLUMN payment_source TEXT;
