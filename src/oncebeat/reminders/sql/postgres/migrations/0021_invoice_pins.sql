-- 0021 (reminders line): the pin of an invoice (the ladder version it started dunning with, reminders 0014) moves
-- out of the invoice row into a narrow table of its own (issue 27 item 5). Pinning wrote a new version of the wide
-- invoices row and of its seven index entries (the pin's column was in two partial indexes, so no HOT update):
-- at ten million invoices the first scan's pin of 1.97M rows was 49 of its 77 s of CPU. Now a pin is one small
-- row written once (moved only by an explicit apply), with its primary key and one index by version.
-- No row: the invoice is not in dunning yet. A deleted invoice takes its pin with it.
CREATE TABLE invoice_pins (
    invoice_id        BIGINT PRIMARY KEY REFERENCES invoices (id) ON DELETE CASCADE,
    ladder_version_id BIGINT NOT NULL REFERENCES ladder_versions (id)
);
INSERT INTO invoice_pins (invoice_id, ladder_version_id)
SELECT id, ladder_version_id FROM invoices WHERE ladder_version_id IS NOT NULL ORDER BY id;
-- The versions in use and the invoices of a version (open_ladder_versions, ladder_holdings, an apply's moves).
CREATE INDEX invoice_pins_version ON invoice_pins (ladder_version_id);
DROP INDEX invoices_ladder_version;
DROP INDEX invoices_unpinned_due;
ALTER TABLE invoices DROP COLUMN ladder_version_id;
