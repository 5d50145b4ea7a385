-- 0007 (reminders line): the superseded stages live in the row of the stage that superseded them, and the scan
-- no longer pays a foreign-key check per reminder (issue 14 item 6: the 1M-invoice scan 23.7 s -> under 10 s).
--
-- reminders.superseded_stages: the lower ladder stages that became due in the same scan as this row's stage and
-- were therefore never sent (collapse = "highest"); ascending, NULL when none. Each is "skipped, superseded by
-- this row's stage": `check` and the dashboard count them so. The scan never creates a stage at or below an
-- invoice's highest recorded stage, so a superseded stage can never be sent later; UNIQUE (invoice_id, stage)
-- still refuses a second row (a second send) of any stage.
ALTER TABLE reminders ADD COLUMN superseded_stages INTEGER[];

-- Existing data: each "superseded: stage N" skipped row moves into the superseded_stages of stage N's row of the
-- same scan (same invoice and occurrence), then the row goes. A skipped row without such a stage-N row stays
-- as it is (check reads both forms).
CREATE TEMPORARY TABLE reminders_0007_fold ON COMMIT DROP AS
SELECT low.id AS low_id, top.id AS top_id, low.stage
FROM reminders low
JOIN reminders top ON top.invoice_id = low.invoice_id
 AND top.stage = CAST(substring(low.reason FROM '^superseded: stage (-?[0-9]+)( |$)') AS INTEGER)
 AND top.stage > low.stage
 AND top.occurrence_id IS NOT DISTINCT FROM low.occurrence_id
WHERE low.state = 'skipped' AND low.reason ~ '^superseded: stage -?[0-9]+( |$)';

UPDATE reminders r SET superseded_stages = f.stages
FROM (SELECT top_id, array_agg(stage ORDER BY stage) AS stages FROM reminders_0007_fold GROUP BY top_id) AS f
WHERE r.id = f.top_id;

DELETE FROM reminders r USING reminders_0007_fold f WHERE r.id = f.low_id;

-- The foreign key reminders.invoice_id -> invoices.id cost 7.4 s of the 23.7 s (one FOR KEY SHARE lookup per
-- inserted reminder). Every reminder is inserted by the scan from a join with invoices, which it reads under
-- the scan lock (scan_lock: a transaction-level advisory lock); nothing in oncebeat deletes an invoice or
-- changes its id (imports upsert by number, keeping the id). This trigger keeps the reference anyway: deleting
-- an invoice that has reminders, changing its id, or truncating invoices while reminders exist is refused
-- (SQLSTATE 23503, as the foreign key did), and it takes the scan lock first, so a scan in flight cannot
-- insert a reminder for an invoice being deleted.
ALTER TABLE reminders DROP CONSTRAINT IF EXISTS reminders_invoice_id_fkey;

-- (Semicolons open the lines of the function body: the migration runner splits statements at a ';' ending a line.)
CREATE FUNCTION reminders_invoice_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(current_schema() || '.oncebeat.reminders.scan'))
    ; IF TG_OP = 'TRUNCATE' THEN
        IF EXISTS (SELECT 1 FROM reminders) THEN
            RAISE EXCEPTION 'cannot truncate invoices: reminders refer to them' USING ERRCODE = '23503'
        ; END IF
        ; RETURN NULL
    ; END IF
    ; IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NEW
    ; END IF
    ; IF EXISTS (SELECT 1 FROM reminders WHERE invoice_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = '23503',
            MESSAGE = 'invoice ' || OLD.number || ' (id ' || OLD.id || ') has reminders: it cannot be deleted or get another id',
            HINT = 'void the invoice instead (status void): its pending reminders are skipped'
    ; END IF
    ; IF TG_OP = 'UPDATE' THEN
        RETURN NEW
    ; END IF
    ; RETURN OLD
; END
$$;

CREATE TRIGGER invoices_keep_reminders BEFORE DELETE OR UPDATE OF id ON invoices
FOR EACH ROW EXECUTE FUNCTION reminders_invoice_guard();

CREATE TRIGGER invoices_keep_reminders_truncate BEFORE TRUNCATE ON invoices
FOR EACH STATEMENT EXECUTE FUNCTION reminders_invoice_guard();
