-- reminders 0024: the dashboard's search by name compares stored folds (issue 27 item 5).
--
-- name_folded: the customer's name without case and accents (oncebeat.reminders.names.fold_name), written with
-- the name by every oncebeat path that writes one (upsert_customer, the what-if copy). SQLite does not fold
-- accents, so existing rows start NULL and are folded in Python by `oncebeat migrate` (5,000 per transaction)
-- and by each scan (at most 50,000); the search folds the NULL rows itself meanwhile.
ALTER TABLE customers ADD COLUMN name_folded TEXT;

-- customers_unfolded: the customers still to fold (every one right after this migration, none once backfilled).
CREATE INDEX customers_unfolded ON customers (id) WHERE name_folded IS NULL;

-- A name changed without its fold (an UPDATE of name alone: a team's own SQL, an older oncebeat) loses the
-- stored fold, so a stale fold is never searched: the row is folded again as above.
-- (Semicolons open the lines of a trigger's body: the migration runner splits statements at a ';' ending a line.)
CREATE TRIGGER customers_name_unfold AFTER UPDATE OF name ON customers FOR EACH ROW
    WHEN NEW.name IS NOT OLD.name AND NEW.name_folded IS OLD.name_folded AND NEW.name_folded IS NOT NULL
BEGIN
    UPDATE customers SET name_folded = NULL WHERE id = NEW.id
; END;
