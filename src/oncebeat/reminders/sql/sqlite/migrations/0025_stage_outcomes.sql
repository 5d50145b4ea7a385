-- reminders 0025: the stage effectiveness (the Reports page, the API, `oncebeat report`) kept as invoices and
-- reminders change, so it reads a few thousand rows instead of every invoice once per stage (issue 27 item 5,
-- docs/benchmarks.md "Round 3d: stage effectiveness").
--
-- stage_outcomes: per (stage, grp, currency, anchor) the counts report_stage_effectiveness_from_invoices (the
-- reference, sql/sqlite/reports.sql) adds up: n invoices still unpaid on their anchor, undated among them, and
-- per window N (3, 7, 14) e<N> eligible and p<N> paid within it, before the window's end is compared with the
-- report's as_of (the reader does that: a window is over when anchor < as_of - N). grp is 'reminded' (anchor: the
-- sent reminder's business date), 'baseline' (anchor: due_on + stage, for each stage of stage_outcome_stages) or
-- 'sent' (one count per sent reminder whatever its invoice, currency '': which stages the report shows). Each
-- change adds rows of differences (old contributions negated, new ones), writers only insert; the scan folds
-- them (compact_stage_outcomes); the report sums whatever rows there are, so it equals the reference at every
-- moment (tests/acceptance/test_stage_outcomes.py compares them).
CREATE TABLE stage_outcomes (
    id       INTEGER PRIMARY KEY,
    stage    INTEGER NOT NULL,
    grp      TEXT NOT NULL,
    currency TEXT NOT NULL,
    anchor   TEXT NOT NULL,
    n        INTEGER NOT NULL,
    undated  INTEGER NOT NULL,
    e3       INTEGER NOT NULL,
    p3       INTEGER NOT NULL,
    e7       INTEGER NOT NULL,
    p7       INTEGER NOT NULL,
    e14      INTEGER NOT NULL,
    p14      INTEGER NOT NULL
);
CREATE INDEX stage_outcomes_key ON stage_outcomes (anchor, stage, grp, currency);
-- stage_outcomes_untracked and the report's stages read the 'sent' counts alone.
CREATE INDEX stage_outcomes_sent ON stage_outcomes (stage) WHERE grp = 'sent';

-- The stages whose baseline rows are kept (every invoice, each of these stages). A stage first sent later is
-- added by track_stage_outcomes (after each scan); until then the report reads the reference query, so it is
-- never wrong.
CREATE TABLE stage_outcome_stages (stage INTEGER PRIMARY KEY);
INSERT INTO stage_outcome_stages (stage) SELECT DISTINCT stage FROM reminders;

-- Every invoice's rows, from the tables as they are (SQLite has no SQL functions: the rules of the reference are
-- written once here, for the triggers, the backfill and track_stage_outcomes). No row when the invoice is void,
-- paid before the anchor, or (baseline) reminded on or before it (fr <= 0). A stage's anchor is
-- date(due_on, 'N days'), which takes a negative N too.
CREATE VIEW stage_outcome_parts AS
SELECT invoice_id, stage, grp, currency, anchor, 1 AS n, u AS undated,
       CASE WHEN u = 0 AND (fr IS NULL OR fr > 3 OR fr > d) THEN 1 ELSE 0 END AS e3,
       CASE WHEN u = 0 AND (fr IS NULL OR fr > 3 OR fr > d) AND d <= 3 THEN 1 ELSE 0 END AS p3,
       CASE WHEN u = 0 AND (fr IS NULL OR fr > 7 OR fr > d) THEN 1 ELSE 0 END AS e7,
       CASE WHEN u = 0 AND (fr IS NULL OR fr > 7 OR fr > d) AND d <= 7 THEN 1 ELSE 0 END AS p7,
       CASE WHEN u = 0 AND (fr IS NULL OR fr > 14 OR fr > d) THEN 1 ELSE 0 END AS e14,
       CASE WHEN u = 0 AND (fr IS NULL OR fr > 14 OR fr > d) AND d <= 14 THEN 1 ELSE 0 END AS p14
FROM (
    SELECT i.id AS invoice_id, t.stage, 'baseline' AS grp, i.currency, date(i.due_on, t.stage || ' days') AS anchor,
           i.status, i.paid_on,
           CASE WHEN i.status = 'paid' THEN CAST(julianday(i.paid_on) - julianday(i.due_on) - t.stage AS INTEGER) END AS d,
           CASE WHEN i.status = 'paid' AND i.paid_on IS NULL THEN 1 ELSE 0 END AS u,
           CAST(julianday((SELECT MIN(r.business_date) FROM reminders r WHERE r.invoice_id = i.id AND r.state = 'sent'))
                - julianday(i.due_on) - t.stage AS INTEGER) AS fr
    FROM invoices i, stage_outcome_stages t
    UNION ALL
    SELECT r.invoice_id, r.stage, 'reminded', i.currency, r.business_date, i.status, i.paid_on,
           CASE WHEN i.status = 'paid' THEN CAST(julianday(i.paid_on) - julianday(r.business_date) AS INTEGER) END,
           CASE WHEN i.status = 'paid' AND i.paid_on IS NULL THEN 1 ELSE 0 END, NULL
    FROM reminders r JOIN invoices i ON i.id = r.invoice_id
    WHERE r.state = 'sent'
) AS parts
WHERE status <> 'void' AND anchor IS NOT NULL AND NOT (status = 'paid' AND paid_on IS NOT NULL AND paid_on < anchor)
  AND (fr IS NULL OR fr > 0)
UNION ALL
SELECT invoice_id, stage, 'sent', '', business_date, 1, 0, 0, 0, 0, 0, 0, 0 FROM reminders WHERE state = 'sent';

-- The triggers take an invoice's rows away before a change that can move them and add them back after it (SQLite
-- runs a row's triggers as that row is written, one writer at a time, so "before" and "after" are exactly the
-- states around this row's change). (Semicolons open the lines of a trigger's body: the migration runner splits
-- statements at a ';' ending a line.)
CREATE TRIGGER stage_outcomes_insert AFTER INSERT ON invoices FOR EACH ROW WHEN NEW.status <> 'void'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14 FROM stage_outcome_parts
    WHERE invoice_id = NEW.id
; END;
CREATE TRIGGER stage_outcomes_update_before BEFORE UPDATE OF id, status, currency, due_on, paid_on ON invoices
FOR EACH ROW WHEN (OLD.status <> 'void' OR NEW.status <> 'void') AND NOT (OLD.id IS NEW.id
    AND OLD.status IS NEW.status AND OLD.currency IS NEW.currency AND OLD.due_on IS NEW.due_on
    AND OLD.paid_on IS NEW.paid_on)
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, -n, -undated, -e3, -p3, -e7, -p7, -e14, -p14 FROM stage_outcome_parts
    WHERE invoice_id IN (OLD.id, NEW.id)
; END;
CREATE TRIGGER stage_outcomes_update_after AFTER UPDATE OF id, status, currency, due_on, paid_on ON invoices
FOR EACH ROW WHEN (OLD.status <> 'void' OR NEW.status <> 'void') AND NOT (OLD.id IS NEW.id
    AND OLD.status IS NEW.status AND OLD.currency IS NEW.currency AND OLD.due_on IS NEW.due_on
    AND OLD.paid_on IS NEW.paid_on)
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14 FROM stage_outcome_parts
    WHERE invoice_id IN (OLD.id, NEW.id)
; END;
CREATE TRIGGER stage_outcomes_delete_before BEFORE DELETE ON invoices FOR EACH ROW WHEN OLD.status <> 'void'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, -n, -undated, -e3, -p3, -e7, -p7, -e14, -p14 FROM stage_outcome_parts
    WHERE invoice_id = OLD.id
; END;
CREATE TRIGGER stage_outcomes_delete_after AFTER DELETE ON invoices FOR EACH ROW WHEN OLD.status <> 'void'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14 FROM stage_outcome_parts
    WHERE invoice_id = OLD.id
; END;

-- reminders: only a change that makes, leaves or moves a sent reminder (state, invoice, stage, business date).
CREATE TRIGGER stage_outcomes_reminder_insert_before BEFORE INSERT ON reminders FOR EACH ROW
WHEN NEW.state = 'sent'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, -n, -undated, -e3, -p3, -e7, -p7, -e14, -p14 FROM stage_outcome_parts
    WHERE invoice_id = NEW.invoice_id
; END;
CREATE TRIGGER stage_outcomes_reminder_insert_after AFTER INSERT ON reminders FOR EACH ROW
WHEN NEW.state = 'sent'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14 FROM stage_outcome_parts
    WHERE invoice_id = NEW.invoice_id
; END;
CREATE TRIGGER stage_outcomes_reminder_update_before BEFORE UPDATE OF state, invoice_id, stage, business_date
ON reminders FOR EACH ROW WHEN (OLD.state = 'sent' OR NEW.state = 'sent') AND NOT (OLD.state IS NEW.state
    AND OLD.invoice_id IS NEW.invoice_id AND OLD.stage IS NEW.stage AND OLD.business_date IS NEW.business_date)
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, -n, -undated, -e3, -p3, -e7, -p7, -e14, -p14 FROM stage_outcome_parts
    WHERE invoice_id IN (OLD.invoice_id, NEW.invoice_id)
; END;
CREATE TRIGGER stage_outcomes_reminder_update_after AFTER UPDATE OF state, invoice_id, stage, business_date
ON reminders FOR EACH ROW WHEN (OLD.state = 'sent' OR NEW.state = 'sent') AND NOT (OLD.state IS NEW.state
    AND OLD.invoice_id IS NEW.invoice_id AND OLD.stage IS NEW.stage AND OLD.business_date IS NEW.business_date)
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14 FROM stage_outcome_parts
    WHERE invoice_id IN (OLD.invoice_id, NEW.invoice_id)
; END;
CREATE TRIGGER stage_outcomes_reminder_delete_before BEFORE DELETE ON reminders FOR EACH ROW
WHEN OLD.state = 'sent'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, -n, -undated, -e3, -p3, -e7, -p7, -e14, -p14 FROM stage_outcome_parts
    WHERE invoice_id = OLD.invoice_id
; END;
CREATE TRIGGER stage_outcomes_reminder_delete_after AFTER DELETE ON reminders FOR EACH ROW
WHEN OLD.state = 'sent'
BEGIN
    INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14 FROM stage_outcome_parts
    WHERE invoice_id = OLD.invoice_id
; END;

INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
SELECT stage, grp, currency, anchor, SUM(n), SUM(undated), SUM(e3), SUM(p3), SUM(e7), SUM(p7), SUM(e14), SUM(p14)
FROM stage_outcome_parts GROUP BY stage, grp, currency, anchor;
