-- reminders 0022: reads every dashboard page makes stay bounded whatever the backlog (issue 27 item 5).
--
-- reminders_outage_waiting: the reminders waiting out a mail outage (pending, deferred_since set), which the
-- banner every page shows counts (reminders_waiting_on_outage, oldest_outage_refusal). Without it the count
-- walked reminders_unfinished (every pending reminder: 1.29M after a first scan of ten million invoices) and
-- read each row to test deferred_since, ~220 ms on every page; this index holds only the rows an outage defers
-- (none outside an outage).
CREATE INDEX reminders_outage_waiting ON reminders (deferred_since) WHERE state = 'pending' AND deferred_since IS NOT NULL;

-- invoice_open_totals: the open invoices per (currency, due date), kept as the invoices change, so the aging
-- (the Reminders page, the aging report) reads a few thousand rows instead of every open invoice (1.97M at ten
-- million invoices: 10.6 s). Each change of an open invoice adds a row of differences (+1 and its amount when
-- an invoice becomes open or enters a group, -1 and its amount when it leaves): writers only ever insert. The
-- scan folds the rows into one per group each day (invoice_open_totals_fold); the aging sums whatever rows
-- there are, so it equals the aging of the invoices themselves at every moment
-- (tests/acceptance/test_page_reads.py compares them).
CREATE TABLE invoice_open_totals (
    id       INTEGER PRIMARY KEY,
    currency TEXT NOT NULL,
    due_on   TEXT NOT NULL,
    invoices INTEGER NOT NULL,
    amount   INTEGER NOT NULL
);
CREATE INDEX invoice_open_totals_group ON invoice_open_totals (currency, due_on);

-- (Semicolons open the lines of a trigger's body: the migration runner splits statements at a ';' ending a line.)
CREATE TRIGGER invoice_open_totals_insert AFTER INSERT ON invoices FOR EACH ROW WHEN NEW.status = 'open'
BEGIN
    INSERT INTO invoice_open_totals (currency, due_on, invoices, amount) VALUES (NEW.currency, NEW.due_on, 1, NEW.amount_due)
; END;
-- Only where the open set can change: an update that leaves status, currency, due date and amount as they were
-- (the scan's pin, a re-import of the same row) adds nothing.
CREATE TRIGGER invoice_open_totals_update AFTER UPDATE OF status, currency, due_on, amount_due ON invoices
FOR EACH ROW WHEN (OLD.status = 'open' OR NEW.status = 'open') AND NOT (OLD.status IS NEW.status
    AND OLD.currency IS NEW.currency AND OLD.due_on IS NEW.due_on AND OLD.amount_due IS NEW.amount_due)
BEGIN
    INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
    SELECT OLD.currency, OLD.due_on, -1, -OLD.amount_due WHERE OLD.status = 'open'
    ; INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
    SELECT NEW.currency, NEW.due_on, 1, NEW.amount_due WHERE NEW.status = 'open'
; END;
CREATE TRIGGER invoice_open_totals_delete AFTER DELETE ON invoices FOR EACH ROW WHEN OLD.status = 'open'
BEGIN
    INSERT INTO invoice_open_totals (currency, due_on, invoices, amount) VALUES (OLD.currency, OLD.due_on, -1, -OLD.amount_due)
; END;

INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
SELECT currency, due_on, COUNT(*), SUM(amount_due) FROM invoices WHERE status = 'open' GROUP BY currency, due_on;

-- reminders_superseded: the rows that record superseded stages (collapse = highest), which the Reminders page
-- counts as skipped (reminder_counts_capped) without reading every reminder.
CREATE INDEX reminders_superseded ON reminders (id) WHERE superseded_stages IS NOT NULL;
