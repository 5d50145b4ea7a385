-- reminders 0002 (0.1's 0006): the reminder app's dashboard: a customer's invoices (search by email).
CREATE INDEX invoices_customer ON invoices (customer_id, id);
