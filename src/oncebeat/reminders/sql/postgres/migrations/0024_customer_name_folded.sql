-- reminders 0024: the dashboard's search by name reads an index, not every customer's name (issue 27 item 5).
--
-- name_folded: the customer's name without case and accents (oncebeat.reminders.names.fold_name), written with
-- the name by every oncebeat path that writes one (upsert_customer, the what-if copy). Neither backend folds
-- accents without an extension, so existing rows start NULL and are folded in Python by `oncebeat migrate` (5,000
-- per transaction) and by each scan (at most 50,000); the search folds the NULL rows itself meanwhile.
ALTER TABLE customers ADD COLUMN name_folded TEXT;

-- customers_unfolded: the customers still to fold (every one right after this migration, none once backfilled).
CREATE INDEX customers_unfolded ON customers (id) WHERE name_folded IS NULL;

-- A name changed without its fold (an UPDATE of name alone: a team's own SQL, an older oncebeat) loses the
-- stored fold, so a stale fold is never searched: the row is folded again as above.
-- (No percent sign in this file: the runner doubles it. Semicolons open the lines of the function body: the migration runner splits statements at a ';' ending a line.)
CREATE FUNCTION customers_name_unfold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.name_folded := NULL
    ; RETURN NEW
; END
$$;
CREATE TRIGGER customers_name_unfold BEFORE UPDATE OF name ON customers
    FOR EACH ROW WHEN (NEW.name IS DISTINCT FROM OLD.name AND NEW.name_folded IS NOT DISTINCT FROM OLD.name_folded)
    EXECUTE FUNCTION customers_name_unfold();

-- customers_name_trigram: a trigram index (pg_trgm) for name_folded LIKE '%needle%' (customers_named_like). The
-- extension is created where the database allows it (pg_trgm is trusted: CREATE on the database suffices), in
-- schema public when there is one, so that dropping a tenant's or a test's schema never drops it under the
-- others; where it cannot be created (no privilege, not installed on the server) the migration goes on without
-- the index and the search scans name_folded instead (correct, slower on a big book).
-- Migrations of several schemas of one database take turns here (the extension is the database's).
DO $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('oncebeat reminders 0024 pg_trgm'))
    ; IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
            CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public
        ; ELSE
            CREATE EXTENSION IF NOT EXISTS pg_trgm
        ; END IF
    ; END IF
; EXCEPTION WHEN insufficient_privilege OR undefined_file OR feature_not_supported OR invalid_schema_name THEN
    RAISE NOTICE USING MESSAGE = 'pg_trgm not available (' || SQLERRM || '): the search by name scans name_folded'
; END
$$;
DO $$
DECLARE
    ext_schema TEXT
; BEGIN
    SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_trgm'
    ; IF ext_schema IS NOT NULL THEN
        EXECUTE 'CREATE INDEX customers_name_trigram ON customers USING gin (name_folded '
                || quote_ident(ext_schema) || '.gin_trgm_ops)'
    ; END IF
; END
$$;
