-- reminders 0025: the stage effectiveness (the Reports page, the API, `oncebeat report`) kept as invoices and
-- reminders change, so it reads a few thousand rows instead of every invoice once per stage (issue 27 item 5,
-- docs/benchmarks.md "Round 3d: stage effectiveness").
--
-- stage_outcomes: per (stage, grp, currency, anchor) the counts report_stage_effectiveness_from_invoices (the
-- reference, sql/postgres/reports.sql) adds up: n invoices still unpaid on their anchor, undated among them, and
-- per window N (3, 7, 14) e<N> eligible and p<N> paid within it, before the window's end is compared with the
-- report's as_of (the reader does that: a window is over when anchor < as_of - N). grp is 'reminded' (anchor: the
-- sent reminder's business date), 'baseline' (anchor: due_on + stage, for each stage of stage_outcome_stages) or
-- 'sent' (one count per sent reminder whatever its invoice, currency '': which stages the report shows). Each
-- change adds rows of differences (old contributions negated, new ones), writers only insert; the scan folds
-- them (compact_stage_outcomes); the report sums whatever rows there are, so it equals the reference at every
-- moment (tests/acceptance/test_stage_outcomes.py compares them).
CREATE TABLE stage_outcomes (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stage    INTEGER NOT NULL,
    grp      TEXT NOT NULL,
    currency TEXT NOT NULL,
    anchor   DATE NOT NULL,
    n        BIGINT NOT NULL,
    undated  BIGINT NOT NULL,
    e3       BIGINT NOT NULL,
    p3       BIGINT NOT NULL,
    e7       BIGINT NOT NULL,
    p7       BIGINT NOT NULL,
    e14      BIGINT NOT NULL,
    p14      BIGINT NOT NULL
);
CREATE INDEX stage_outcomes_key ON stage_outcomes (anchor, stage, grp, currency);
-- stage_outcomes_untracked and the report's stages read the 'sent' counts alone.
CREATE INDEX stage_outcomes_sent ON stage_outcomes (stage) WHERE grp = 'sent';

-- The stages whose baseline rows are kept (every invoice, each of these stages). A stage first sent later is
-- added by track_stage_outcomes (after each scan, under a share lock of invoices and reminders); until then the
-- report reads the reference query, so it is never wrong.
CREATE TABLE stage_outcome_stages (stage INTEGER PRIMARY KEY);
INSERT INTO stage_outcome_stages (stage) SELECT DISTINCT stage FROM reminders;

-- One invoice's contribution at one anchor (the rules of the reference, written once here for the triggers and
-- the backfill): no row when it is void, paid before the anchor, or (baseline) reminded on or before it (fr <= 0).
-- fr: the first sent reminder's day minus the anchor (NULL: none, or the reminded group). A plain SQL function,
-- so the planner inlines it where it is called.
CREATE FUNCTION stage_outcome_row(p_stage INTEGER, p_grp TEXT, p_cur TEXT, p_anchor DATE, p_status TEXT,
                                  p_paid DATE, p_fr INTEGER, p_sign INTEGER)
RETURNS TABLE (stage INTEGER, grp TEXT, currency TEXT, anchor DATE, n BIGINT, undated BIGINT, e3 BIGINT,
               p3 BIGINT, e7 BIGINT, p7 BIGINT, e14 BIGINT, p14 BIGINT) LANGUAGE sql IMMUTABLE AS $$
    SELECT p_stage, p_grp, p_cur, p_anchor, CAST(p_sign AS BIGINT), CAST(p_sign * u AS BIGINT),
           CAST(p_sign * CASE WHEN u = 0 AND (p_fr IS NULL OR p_fr > 3 OR p_fr > d) THEN 1 ELSE 0 END AS BIGINT),
           CAST(p_sign * CASE WHEN u = 0 AND (p_fr IS NULL OR p_fr > 3 OR p_fr > d) AND d <= 3 THEN 1 ELSE 0 END AS BIGINT),
           CAST(p_sign * CASE WHEN u = 0 AND (p_fr IS NULL OR p_fr > 7 OR p_fr > d) THEN 1 ELSE 0 END AS BIGINT),
           CAST(p_sign * CASE WHEN u = 0 AND (p_fr IS NULL OR p_fr > 7 OR p_fr > d) AND d <= 7 THEN 1 ELSE 0 END AS BIGINT),
           CAST(p_sign * CASE WHEN u = 0 AND (p_fr IS NULL OR p_fr > 14 OR p_fr > d) THEN 1 ELSE 0 END AS BIGINT),
           CAST(p_sign * CASE WHEN u = 0 AND (p_fr IS NULL OR p_fr > 14 OR p_fr > d) AND d <= 14 THEN 1 ELSE 0 END AS BIGINT)
    FROM (SELECT CASE WHEN p_status = 'paid' THEN p_paid - p_anchor END AS d,
                 CASE WHEN p_status = 'paid' AND p_paid IS NULL THEN 1 ELSE 0 END AS u) AS x
    WHERE p_status <> 'void' AND NOT (p_status = 'paid' AND p_paid IS NOT NULL AND p_paid < p_anchor)
      AND (p_fr IS NULL OR p_fr > 0)
$$;

-- One invoice's rows (given its fields and its first sent reminder's day): a baseline row per tracked stage.
CREATE FUNCTION stage_outcome_baseline(p_status TEXT, p_cur TEXT, p_due DATE, p_paid DATE, p_first DATE,
                                       p_sign INTEGER)
RETURNS TABLE (stage INTEGER, grp TEXT, currency TEXT, anchor DATE, n BIGINT, undated BIGINT, e3 BIGINT,
               p3 BIGINT, e7 BIGINT, p7 BIGINT, e14 BIGINT, p14 BIGINT) LANGUAGE sql STABLE AS $$
    SELECT o.* FROM stage_outcome_stages t,
        stage_outcome_row(t.stage, 'baseline', p_cur, p_due + t.stage, p_status, p_paid,
                          p_first - (p_due + t.stage), p_sign) AS o
$$;

-- Every row from the tables themselves (the backfill, and after a TRUNCATE), already summed per key.
CREATE FUNCTION stage_outcome_rebuild() RETURNS void LANGUAGE sql AS $$
    DELETE FROM stage_outcomes
    ; INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    SELECT o.stage, o.grp, o.currency, o.anchor, SUM(o.n), SUM(o.undated), SUM(o.e3), SUM(o.p3), SUM(o.e7),
           SUM(o.p7), SUM(o.e14), SUM(o.p14)
    FROM (
        SELECT b.* FROM invoices i
        LEFT JOIN (SELECT invoice_id, MIN(business_date) AS first_sent FROM reminders WHERE state = 'sent'
                   GROUP BY invoice_id) AS f ON f.invoice_id = i.id,
            stage_outcome_baseline(i.status, i.currency, i.due_on, i.paid_on, f.first_sent, 1) AS b
        UNION ALL
        SELECT m.* FROM reminders r JOIN invoices i ON i.id = r.invoice_id,
            stage_outcome_row(r.stage, 'reminded', i.currency, r.business_date, i.status, i.paid_on, NULL, 1) AS m
        WHERE r.state = 'sent'
        UNION ALL
        SELECT r.stage, 'sent', '', r.business_date, 1, 0, 0, 0, 0, 0, 0, 0 FROM reminders r WHERE r.state = 'sent'
    ) AS o
    GROUP BY o.stage, o.grp, o.currency, o.anchor
$$;

-- invoices: row triggers (an invoice's rows depend on its own fields and its sent reminders, read as they are:
-- the row lock of the invoice being written orders this after any reminder change of the same invoice, which locks
-- the invoice too, below). plan_cache_mode: with the row's values as parameters PL/pgSQL would plan the inlined
-- functions again for every row (a custom plan folds the constants and always looks cheaper), 1-1.5 ms per row
-- instead of tens of microseconds (measured: docs/benchmarks.md, round 3d). (Semicolons open the lines of a function body: the migration runner splits statements
-- at a ';' ending a line.)
CREATE FUNCTION stage_outcomes_invoice() RETURNS trigger LANGUAGE plpgsql
    SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    first_sent DATE
; BEGIN
    IF TG_OP <> 'INSERT' THEN
        SELECT MIN(business_date) INTO first_sent FROM reminders WHERE invoice_id = OLD.id AND state = 'sent'
        ; INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
        SELECT b.* FROM stage_outcome_baseline(OLD.status, OLD.currency, OLD.due_on, OLD.paid_on, first_sent, -1) AS b
        UNION ALL
        SELECT m.* FROM reminders r,
            stage_outcome_row(r.stage, 'reminded', OLD.currency, r.business_date, OLD.status, OLD.paid_on, NULL, -1) AS m
        WHERE r.invoice_id = OLD.id AND r.state = 'sent'
    ; END IF
    ; IF TG_OP <> 'DELETE' THEN
        SELECT MIN(business_date) INTO first_sent FROM reminders WHERE invoice_id = NEW.id AND state = 'sent'
        ; INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
        SELECT b.* FROM stage_outcome_baseline(NEW.status, NEW.currency, NEW.due_on, NEW.paid_on, first_sent, 1) AS b
        UNION ALL
        SELECT m.* FROM reminders r,
            stage_outcome_row(r.stage, 'reminded', NEW.currency, r.business_date, NEW.status, NEW.paid_on, NULL, 1) AS m
        WHERE r.invoice_id = NEW.id AND r.state = 'sent'
    ; END IF
    ; RETURN NULL
; END
$$;
-- Only where a count can move: an update that leaves status, currency and the two dates as they were (the scan's
-- pin, a re-import of the same row, an amount) adds nothing; a void invoice counts nowhere.
CREATE TRIGGER stage_outcomes_insert AFTER INSERT ON invoices
    FOR EACH ROW WHEN (NEW.status <> 'void') EXECUTE FUNCTION stage_outcomes_invoice();
CREATE TRIGGER stage_outcomes_update AFTER UPDATE OF id, status, currency, due_on, paid_on ON invoices
    FOR EACH ROW WHEN ((OLD.status <> 'void' OR NEW.status <> 'void') AND (OLD.id, OLD.status, OLD.currency,
        OLD.due_on, OLD.paid_on) IS DISTINCT FROM (NEW.id, NEW.status, NEW.currency, NEW.due_on, NEW.paid_on))
    EXECUTE FUNCTION stage_outcomes_invoice();
CREATE TRIGGER stage_outcomes_delete AFTER DELETE ON invoices
    FOR EACH ROW WHEN (OLD.status <> 'void') EXECUTE FUNCTION stage_outcomes_invoice();

-- reminders: statement triggers with transition tables, so a statement that sends several reminders of one
-- invoice (a grouped notice) computes the invoice's first sent day before and after it once. Only sent reminders
-- count: a statement that neither makes nor leaves one sent, nor moves one (stage, business date, invoice), adds
-- nothing. The invoices concerned are locked (FOR NO KEY UPDATE, in id order) before anything is read: a
-- concurrent payment of one of them, or a concurrent send of another of its stages, is then either committed and
-- seen by every read below (READ COMMITTED: each statement of a function takes a new snapshot) or waits for this
-- transaction, so each change's differences are computed on the state the previous change left.
CREATE FUNCTION stage_outcomes_reminders() RETURNS trigger LANGUAGE plpgsql
    SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    changed JSONB
; BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT jsonb_agg(jsonb_build_object('id', n.id, 'ni', n.invoice_id, 'ns', n.stage, 'nb', n.business_date,
                                            'nsent', true))
        INTO changed FROM new_rows n WHERE n.state = 'sent'
    ; ELSIF TG_OP = 'DELETE' THEN
        SELECT jsonb_agg(jsonb_build_object('id', o.id, 'oi', o.invoice_id, 'os', o.stage, 'ob', o.business_date,
                                            'osent', true))
        INTO changed FROM old_rows o WHERE o.state = 'sent'
    ; ELSE
        -- Most updates (the scan's holds, deferrals, a send's claim) touch no sent reminder: skip the join.
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE state = 'sent')
           AND NOT EXISTS (SELECT 1 FROM old_rows WHERE state = 'sent') THEN
            RETURN NULL
        ; END IF
        ; SELECT jsonb_agg(jsonb_build_object('id', o.id, 'oi', o.invoice_id, 'os', o.stage, 'ob', o.business_date,
                                            'osent', o.state = 'sent', 'ni', n.invoice_id, 'ns', n.stage,
                                            'nb', n.business_date, 'nsent', n.state = 'sent'))
        INTO changed FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (o.state = 'sent' OR n.state = 'sent')
          AND (o.state, o.invoice_id, o.stage, o.business_date) IS DISTINCT FROM
              (n.state, n.invoice_id, n.stage, n.business_date)
    ; END IF
    ; IF changed IS NULL THEN
        RETURN NULL
    ; END IF
    ; PERFORM 1 FROM invoices WHERE id IN (
        SELECT c.oi FROM jsonb_to_recordset(changed) AS c (oi BIGINT) UNION
        SELECT c.ni FROM jsonb_to_recordset(changed) AS c (ni BIGINT)) ORDER BY id FOR NO KEY UPDATE
    ; INSERT INTO stage_outcomes (stage, grp, currency, anchor, n, undated, e3, p3, e7, p7, e14, p14)
    WITH ch AS (
        SELECT c.id, c.oi, c.os, c.ob, COALESCE(c.osent, false) AS osent, c.ni, c.ns, c.nb,
               COALESCE(c.nsent, false) AS nsent
        FROM jsonb_to_recordset(changed) AS c (id BIGINT, oi BIGINT, os INTEGER, ob DATE, osent BOOLEAN,
                                              ni BIGINT, ns INTEGER, nb DATE, nsent BOOLEAN)
    ), ids AS (
        SELECT oi AS id FROM ch WHERE osent UNION SELECT ni FROM ch WHERE nsent
    ), cur AS (  -- the invoices' sent reminders now
        SELECT r.id, r.invoice_id, r.business_date FROM reminders r JOIN ids ON ids.id = r.invoice_id
        WHERE r.state = 'sent'
    ), fs_after AS (
        SELECT invoice_id, MIN(business_date) AS fs FROM cur GROUP BY invoice_id
    ), fs_before AS (  -- before the statement: those it did not change, and the old rows of those it did
        SELECT invoice_id, MIN(d) AS fs FROM (
            SELECT cur.invoice_id, cur.business_date AS d FROM cur LEFT JOIN ch ON ch.id = cur.id WHERE ch.id IS NULL
            UNION ALL
            SELECT ch.oi, ch.ob FROM ch WHERE ch.osent) AS b
        GROUP BY invoice_id
    ), inv AS (
        SELECT i.id, i.status, i.currency, i.due_on, i.paid_on, a.fs AS fs_after, b.fs AS fs_before
        FROM invoices i JOIN ids ON ids.id = i.id
        LEFT JOIN fs_after a ON a.invoice_id = i.id LEFT JOIN fs_before b ON b.invoice_id = i.id
    )
    SELECT b.* FROM inv, stage_outcome_baseline(inv.status, inv.currency, inv.due_on, inv.paid_on, inv.fs_before, -1) AS b
    WHERE inv.fs_before IS DISTINCT FROM inv.fs_after
    UNION ALL
    SELECT b.* FROM inv, stage_outcome_baseline(inv.status, inv.currency, inv.due_on, inv.paid_on, inv.fs_after, 1) AS b
    WHERE inv.fs_before IS DISTINCT FROM inv.fs_after
    UNION ALL
    SELECT m.* FROM ch JOIN inv ON inv.id = ch.oi,
        stage_outcome_row(ch.os, 'reminded', inv.currency, ch.ob, inv.status, inv.paid_on, NULL, -1) AS m
    WHERE ch.osent
    UNION ALL
    SELECT m.* FROM ch JOIN inv ON inv.id = ch.ni,
        stage_outcome_row(ch.ns, 'reminded', inv.currency, ch.nb, inv.status, inv.paid_on, NULL, 1) AS m
    WHERE ch.nsent
    UNION ALL
    SELECT ch.os, 'sent', '', ch.ob, -1, 0, 0, 0, 0, 0, 0, 0 FROM ch WHERE ch.osent
    UNION ALL
    SELECT ch.ns, 'sent', '', ch.nb, 1, 0, 0, 0, 0, 0, 0, 0 FROM ch WHERE ch.nsent
    ; RETURN NULL
; END
$$;
CREATE TRIGGER stage_outcomes_reminders_insert AFTER INSERT ON reminders REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION stage_outcomes_reminders();
CREATE TRIGGER stage_outcomes_reminders_update AFTER UPDATE ON reminders
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION stage_outcomes_reminders();
CREATE TRIGGER stage_outcomes_reminders_delete AFTER DELETE ON reminders REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION stage_outcomes_reminders();

-- A TRUNCATE of invoices or reminders (row triggers do not fire): every row again from the tables.
CREATE FUNCTION stage_outcomes_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM stage_outcome_rebuild()
    ; RETURN NULL
; END
$$;
CREATE TRIGGER stage_outcomes_invoices_truncate AFTER TRUNCATE ON invoices
    FOR EACH STATEMENT EXECUTE FUNCTION stage_outcomes_truncated();
CREATE TRIGGER stage_outcomes_reminders_truncate AFTER TRUNCATE ON reminders
    FOR EACH STATEMENT EXECUTE FUNCTION stage_outcomes_truncated();

SELECT stage_outcome_rebuild();
