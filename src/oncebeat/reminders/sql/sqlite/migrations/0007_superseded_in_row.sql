-- 0007 (reminders line): the superseded stages live in the row of the stage that superseded them (issue 14
-- item 6: the scan writes one row per invoice instead of one per due stage).
--
-- reminders.superseded_stages: a JSON array of the lower ladder stages that became due in the same scan as this
-- row's stage and were therefore never sent (collapse = "highest"); ascending, NULL when none. Each is "skipped,
-- superseded by this row's stage": `check` and the dashboard count them so. The scan never creates a stage at or
-- below an invoice's highest recorded stage, so a superseded stage can never be sent later; UNIQUE (invoice_id,
-- stage) still refuses a second row (a second send) of any stage.
-- SQLite keeps the foreign key reminders.invoice_id -> invoices.id (dropping it means rebuilding the table, and
-- its check is a cheap b-tree probe here; on PostgreSQL it cost 7.4 s of the 1M scan and is replaced there).
ALTER TABLE reminders ADD COLUMN superseded_stages TEXT;

-- Existing data: each "superseded: stage N" skipped row moves into the superseded_stages of stage N's row of the
-- same scan (same invoice and occurrence), then the row goes. A skipped row without such a stage-N row stays
-- as it is (check reads both forms).
CREATE TEMPORARY TABLE reminders_0007_fold AS
SELECT low.id AS low_id, top.id AS top_id, low.stage AS stage
FROM reminders low
JOIN reminders top ON top.invoice_id = low.invoice_id
 AND top.stage = CAST(substr(low.reason, 19) AS INTEGER)
 AND top.stage > low.stage
 AND top.occurrence_id IS low.occurrence_id
WHERE low.state = 'skipped'
  AND (low.reason GLOB 'superseded: stage [0-9]*' OR low.reason GLOB 'superseded: stage -[0-9]*');

UPDATE reminders SET superseded_stages = (
    SELECT json_group_array(stage) FROM (SELECT f.stage FROM reminders_0007_fold f
                                         WHERE f.top_id = reminders.id ORDER BY f.stage))
WHERE id IN (SELECT top_id FROM reminders_0007_fold);

DELETE FROM reminders WHERE id IN (SELECT low_id FROM reminders_0007_fold);

DROP TABLE reminders_0007_fold;
