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
-- an invoice becomes open or enters a group, -1 and its amount when it leaves): writers only ever insert, so
-- concurrent imports and payments never wait on one another's summary rows. The scan folds the rows into one
-- per group each day (invoice_open_totals_fold); the aging sums whatever rows there are, so it equals the
-- aging of the invoices themselves at every moment (tests/acceptance/test_page_reads.py compares them).
CREATE TABLE invoice_open_totals (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    currency TEXT NOT NULL,
    due_on   DATE NOT NULL,
    invoices BIGINT NOT NULL,
    amount   BIGINT NOT NULL
);
CREATE INDEX invoice_open_totals_group ON invoice_open_totals (currency, due_on);

-- (Semicolons open the lines of the function body: the migration runner splits statements at a ';' ending a line.)
CREATE FUNCTION invoice_open_totals_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM invoice_open_totals
        ; RETURN NULL
    ; END IF
    ; IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'open' THEN
        INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
        VALUES (OLD.currency, OLD.due_on, -1, -OLD.amount_due)
    ; END IF
    ; IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'open' THEN
        INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
        VALUES (NEW.currency, NEW.due_on, 1, NEW.amount_due)
    ; END IF
    ; RETURN NULL
; END
$$;
-- Row triggers, each only where the open set can change: an update that leaves status, currency, due date and
-- amount as they were (the scan's pin, a re-import of the same row) runs no function.
CREATE TRIGGER invoice_open_totals_insert AFTER INSERT ON invoices
    FOR EACH ROW WHEN (NEW.status = 'open') EXECUTE FUNCTION invoice_open_totals_track();
CREATE TRIGGER invoice_open_totals_update AFTER UPDATE OF status, currency, due_on, amount_due ON invoices
    FOR EACH ROW WHEN ((OLD.status = 'open' OR NEW.status = 'open') AND (OLD.status, OLD.currency, OLD.due_on,
        OLD.amount_due) IS DISTINCT FROM (NEW.status, NEW.currency, NEW.due_on, NEW.amount_due))
    EXECUTE FUNCTION invoice_open_totals_track();
CREATE TRIGGER invoice_open_totals_delete AFTER DELETE ON invoices
    FOR EACH ROW WHEN (OLD.status = 'open') EXECUTE FUNCTION invoice_open_totals_track();
-- A TRUNCATE of invoices (allowed while no reminder refers to them: invoices_keep_reminders_truncate) empties it.
CREATE TRIGGER invoice_open_totals_truncate AFTER TRUNCATE ON invoices
    FOR EACH STATEMENT EXECUTE FUNCTION invoice_open_totals_track();

INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
SELECT currency, due_on, COUNT(*), SUM(amount_due) FROM invoices WHERE status = 'open' GROUP BY currency, due_on;

-- reminders_superseded: the rows that record superseded stages (collapse = highest), which the Reminders page
-- counts as skipped (reminder_counts_capped) without reading every reminder.
CREATE INDEX reminders_superseded ON reminders (id) WHERE superseded_stages IS NOT NULL;
