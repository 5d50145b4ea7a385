-- reminders 0012: invoices.payment_url, the invoice's pay-now page (an https URL checked on import), shown in its
-- reminders as a button and a plain link (issue 24 item 2). NULL: none known.
ALTER TABLE invoices ADD COLUMN payment_url TEXT;
