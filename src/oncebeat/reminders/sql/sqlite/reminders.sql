-- The reminder queries whose SQL differs on SQLite (the others: common/reminders.sql). Lists and stage ladders
-- arrive as JSON text (json_each()); aggregates carry "[TIMESTAMPTZ]"/"[DATE]" in their alias.

-- name: invoice_states
-- Status and payment date of the invoices with these numbers (what an import is about to change).
SELECT id, number, status, paid_on, issued_on FROM invoices WHERE number IN (SELECT value FROM json_each(:numbers));

-- name: scan_insert_reminders
-- :stages is a JSON list of {"stage": N, "cutoff": "YYYY-MM-DD", "business_date": "YYYY-MM-DD", "tz": Z|null}:
-- a stage is due for an invoice when due_on <= cutoff (= business date - N days). tz null: every customer
-- (send_zone = "schedule"); otherwise the row applies to customers whose zone (customer tz, else :default_tz)
-- is Z, with that zone's business date (send_zone = "customer").
-- collapse = "highest": one row per invoice, its highest due stage, pending, when that stage is above every
-- stage the invoice already has (the ladder never goes back); the lower stages that became due with it and
-- were not recorded before go into its superseded_stages (a JSON array: skipped, superseded; never sent later).
-- Each invoice meets exactly one ladder row: the stage whose due dates run from its own cutoff down to (not
-- including) the next higher stage's cutoff; no per-invoice aggregate, one index range scan per stage.
-- Returns one row per reminder created: pending (1) and its number of superseded stages.
WITH stages AS MATERIALIZED (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date,
           CAST(json_extract(value, '$.lv') AS INTEGER) AS lv, CAST(json_extract(value, '$.nominal') AS INTEGER) AS nominal
    FROM json_each(:stages)
), ladder AS (
    SELECT s.stage, s.cutoff, s.tz, s.business_date, s.lv,
           LEAD(s.cutoff) OVER (PARTITION BY s.lv, s.tz ORDER BY s.stage) AS higher_cutoff,
           (SELECT json_group_array(l.stage) FROM (SELECT l.stage FROM stages l WHERE l.lv = s.lv AND l.tz IS s.tz
                                                  AND l.stage < s.stage
                                                  ORDER BY l.stage) AS l) AS lower
    FROM stages s
), due AS (
    SELECT i.id AS invoice_id, s.stage, s.business_date, s.lower, s.lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage
    FROM ladder s
    JOIN invoices i INDEXED BY invoices_open_due
      ON i.due_on <= s.cutoff AND i.due_on > COALESCE(s.higher_cutoff, '')
      AND EXISTS (SELECT 1 FROM invoice_pins pin WHERE pin.invoice_id = i.id AND pin.ladder_version_id = s.lv)
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
)
INSERT INTO reminders (invoice_id, stage, state, reason, superseded_stages, occurrence_id, business_date,
                       created_at, updated_at, ladder_version_id)
SELECT invoice_id, stage, 'pending', NULL,
       CASE WHEN last_stage IS NULL THEN NULLIF(lower, '[]')
            ELSE (SELECT NULLIF(json_group_array(x.value), '[]') FROM json_each(lower) AS x WHERE x.value > last_stage)
       END,
       :occurrence_id, business_date, :now, :now, lv
FROM due
WHERE last_stage IS NULL OR stage > last_stage
ON CONFLICT DO NOTHING
RETURNING 1 AS pending, COALESCE(json_array_length(superseded_stages), 0) AS superseded;

-- name: scan_insert_next_reminders
-- :stages is a JSON list of {"stage": N, "cutoff": "YYYY-MM-DD", "business_date": "YYYY-MM-DD", "tz": Z|null}:
-- a stage is due for an invoice when due_on <= cutoff (= business date - N days). tz null: every customer
-- (send_zone = "schedule"); otherwise the row applies to customers whose zone (customer tz, else :default_tz)
-- is Z, with that zone's business date (send_zone = "customer").
-- collapse = "next" (README "Stage order after an outage"): each open invoice gets at most ONE stage, the lowest
-- ladder stage above the highest stage it already has (the ladder never goes back), when that stage's own offset
-- has come, a courtesy stage (<= 0) only while the invoice is not yet overdue, and no sooner than
-- (stage - previous stage) days after the previous stage's business date (spacing "from_sent"; "nominal": on a
-- later business date than the previous stage, so a second scan of one day never sends a second stage).
-- Nothing is recorded superseded.
-- Returns one row per reminder created: pending (1), superseded (0).
WITH stages AS MATERIALIZED (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date,
           CAST(json_extract(value, '$.lv') AS INTEGER) AS lv, CAST(json_extract(value, '$.nominal') AS INTEGER) AS nominal
    FROM json_each(:stages)
), open_due AS MATERIALIZED (
    -- Once per invoice: its last stage and its customer's zone (looked up only when the stage rows name zones,
    -- send_zone = "customer"). Flattened into the join below, both were looked up again for every (invoice,
    -- stage row) pair: 124 stage rows (4 stages x 31 zones) made a scan of the 412-invoice Chinook demo 20-35 ms.
    SELECT i.id AS invoice_id, i.due_on, pin.ladder_version_id AS lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage,
           CASE WHEN EXISTS (SELECT 1 FROM stages WHERE tz IS NOT NULL) THEN
               (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id) END AS zone
    FROM invoices i INDEXED BY invoices_open_due JOIN invoice_pins pin ON pin.invoice_id = i.id
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
), nxt AS (
    SELECT i.invoice_id, i.last_stage, s.business_date, i.lv, s.nominal, MIN(s.stage) AS stage
    FROM open_due i JOIN stages s ON i.due_on <= s.cutoff AND s.lv = i.lv AND (s.tz IS NULL OR s.tz = i.zone)
    WHERE (i.last_stage IS NULL OR s.stage > i.last_stage) AND (s.stage > 0 OR i.due_on >= s.business_date)
    GROUP BY i.invoice_id, i.last_stage, s.business_date, i.lv, s.nominal
), ready AS (
    SELECT n.invoice_id, n.stage, n.business_date, n.lv FROM nxt n
    LEFT JOIN reminders p ON p.invoice_id = n.invoice_id AND p.stage = n.last_stage
    WHERE n.last_stage IS NULL OR (n.nominal = 1 AND p.business_date < n.business_date) OR date(p.business_date, '+' || (n.stage - n.last_stage) || ' days') <= n.business_date
)
INSERT INTO reminders (invoice_id, stage, state, reason, occurrence_id, business_date, created_at, updated_at,
                       ladder_version_id)
SELECT invoice_id, stage, 'pending', NULL, :occurrence_id, business_date, :now, :now, lv
FROM ready
WHERE true
ON CONFLICT DO NOTHING
RETURNING 1 AS pending, 0 AS superseded;

-- name: pending_send_jobs
-- The send job of every pending reminder (Queue.enqueue_select inserts them; the unique key skips a reminder
-- whose send job is unfinished), so a reminder whose job was discarded (e.g. its worker died on the last
-- attempt) is retried by the next scan.
-- In reminder order: the jobs' ids (which the claim follows) then agree with the cap's line (cap_waiting: oldest
-- business date, stage, id), so a capped customer's oldest reminder is tried first; without ORDER BY the rows came
-- in physical order, which an update of a reminder row can change (CI saw INV-2's send run before INV-1's).
SELECT json_object('reminder_id', r.id) AS args, 'reminder:' || r.id AS unique_key, r.occurrence_id
FROM reminders r
WHERE r.state IN ('pending', 'deferred')
ORDER BY r.business_date, r.stage, r.id;

-- name: preview_due
-- What scan_insert_reminders would create (nothing written): per invoice its top stage and how many lower
-- stages it would record superseded.
WITH stages AS MATERIALIZED (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date,
           CAST(json_extract(value, '$.lv') AS INTEGER) AS lv, CAST(json_extract(value, '$.nominal') AS INTEGER) AS nominal
    FROM json_each(:stages)
), ladder AS (
    SELECT s.stage, s.cutoff, s.tz, s.business_date, s.lv,
           LEAD(s.cutoff) OVER (PARTITION BY s.lv, s.tz ORDER BY s.stage) AS higher_cutoff,
           (SELECT json_group_array(l.stage) FROM (SELECT l.stage FROM stages l WHERE l.lv = s.lv AND l.tz IS s.tz
                                                  AND l.stage < s.stage
                                                  ORDER BY l.stage) AS l) AS lower
    FROM stages s
), due AS (
    SELECT i.id AS invoice_id, s.stage, s.business_date, s.lower, s.lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage
    FROM ladder s
    JOIN invoices i INDEXED BY invoices_open_due
      ON i.due_on <= s.cutoff AND i.due_on > COALESCE(s.higher_cutoff, '')
      AND EXISTS (SELECT 1 FROM invoice_pins pin WHERE pin.invoice_id = i.id AND pin.ladder_version_id = s.lv)
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
)
SELECT i.number, c.email, c.name, i.currency, i.amount_due, i.due_on, d.lv, d.stage,
       CASE WHEN d.last_stage IS NULL THEN json_array_length(d.lower)
            ELSE (SELECT COUNT(*) FROM json_each(d.lower) AS x WHERE x.value > d.last_stage) END AS superseded
FROM due d JOIN invoices i ON i.id = d.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE d.last_stage IS NULL OR d.stage > d.last_stage
ORDER BY i.due_on, i.number;

-- name: preview_next_due
-- What scan_insert_next_reminders would create (nothing written).
WITH stages AS MATERIALIZED (
    SELECT CAST(json_extract(value, '$.stage') AS INTEGER) AS stage, json_extract(value, '$.cutoff') AS cutoff,
           json_extract(value, '$.tz') AS tz, json_extract(value, '$.business_date') AS business_date,
           CAST(json_extract(value, '$.lv') AS INTEGER) AS lv, CAST(json_extract(value, '$.nominal') AS INTEGER) AS nominal
    FROM json_each(:stages)
), open_due AS MATERIALIZED (
    -- Once per invoice: its last stage and its customer's zone (looked up only when the stage rows name zones,
    -- send_zone = "customer"). Flattened into the join below, both were looked up again for every (invoice,
    -- stage row) pair: 124 stage rows (4 stages x 31 zones) made a scan of the 412-invoice Chinook demo 20-35 ms.
    SELECT i.id AS invoice_id, i.due_on, pin.ladder_version_id AS lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id) AS last_stage,
           CASE WHEN EXISTS (SELECT 1 FROM stages WHERE tz IS NOT NULL) THEN
               (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id) END AS zone
    FROM invoices i INDEXED BY invoices_open_due JOIN invoice_pins pin ON pin.invoice_id = i.id
    WHERE i.status = 'open' AND i.due_on <= :max_cutoff
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
), nxt AS (
    SELECT i.invoice_id, i.last_stage, s.business_date, i.lv, s.nominal, MIN(s.stage) AS stage
    FROM open_due i JOIN stages s ON i.due_on <= s.cutoff AND s.lv = i.lv AND (s.tz IS NULL OR s.tz = i.zone)
    WHERE (i.last_stage IS NULL OR s.stage > i.last_stage) AND (s.stage > 0 OR i.due_on >= s.business_date)
    GROUP BY i.invoice_id, i.last_stage, s.business_date, i.lv, s.nominal
), ready AS (
    SELECT n.invoice_id, n.stage, n.business_date, n.lv FROM nxt n
    LEFT JOIN reminders p ON p.invoice_id = n.invoice_id AND p.stage = n.last_stage
    WHERE n.last_stage IS NULL OR (n.nominal = 1 AND p.business_date < n.business_date) OR date(p.business_date, '+' || (n.stage - n.last_stage) || ' days') <= n.business_date
)
SELECT i.number, c.email, c.name, i.currency, i.amount_due, i.due_on, r.lv, r.stage, 0 AS superseded
FROM ready r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
ORDER BY i.due_on, i.number;

-- name: reminder_counts
-- Reminders per stage and state (index reminders_stage_state); a stage recorded superseded in a higher stage's
-- row (superseded_stages, reminders 0007) counts as skipped.
SELECT stage, state, SUM(n) AS n FROM (
    SELECT stage, state, COUNT(*) AS n FROM reminders GROUP BY stage, state
    UNION ALL
    SELECT CAST(s.value AS INTEGER) AS stage, 'skipped' AS state, COUNT(*) AS n
    FROM reminders r, json_each(r.superseded_stages) AS s
    WHERE r.superseded_stages IS NOT NULL GROUP BY s.value
)
GROUP BY stage, state ORDER BY stage, state;

-- name: reminder_counts_capped
-- The Reminders page's table: reminders per stage and state, each counted up to the cap parameter (the page shows a
-- count that reached it as "more than" one less), so it reads a bounded number of index entries whatever the
-- book (an exact count read all 1.29M reminders of a first scan over ten million invoices). The stages come from
-- reminders_stage_state one at a time (a skip scan); a stage recorded superseded in a higher stage's row
-- (superseded_stages) counts as skipped, from the first rows of reminders_superseded up to the cap (state
-- 'superseded' here; the caller adds it to skipped; stage -1 'superseded_rows': how many such rows were read, up
-- to the cap). n reaching the cap means there are at least that many. ORDER BY id: the first rows of the
-- partial index reminders_superseded; without it PostgreSQL chose a sequential scan of every reminder (to find
-- none: 190 ms at 1.3M reminders).
WITH RECURSIVE st (stage) AS (
    SELECT MIN(stage) FROM reminders
    UNION ALL
    SELECT (SELECT MIN(r.stage) FROM reminders r WHERE r.stage > st.stage) FROM st WHERE st.stage IS NOT NULL
)
SELECT stage, state, n FROM (
    SELECT st.stage AS stage, s.state AS state,
           (SELECT COUNT(*) FROM (SELECT 1 AS one FROM reminders r WHERE r.stage = st.stage AND r.state = s.state
                                  LIMIT :cap) AS c) AS n
    FROM st CROSS JOIN (SELECT 'pending' AS state UNION ALL SELECT 'deferred' UNION ALL SELECT 'sent'
                        UNION ALL SELECT 'held' UNION ALL SELECT 'skipped' UNION ALL SELECT 'failed'
                        UNION ALL SELECT 'in_doubt') AS s
    WHERE st.stage IS NOT NULL
    UNION ALL
    SELECT -1, 'superseded_rows', COUNT(*) FROM (SELECT 1 AS one FROM reminders WHERE superseded_stages IS NOT NULL
                                                 ORDER BY id LIMIT :cap) AS c
    UNION ALL
    SELECT stage, 'superseded', COUNT(*) FROM (
        SELECT CAST(j.value AS INTEGER) AS stage
        FROM (SELECT superseded_stages FROM reminders WHERE superseded_stages IS NOT NULL
                   ORDER BY id LIMIT :cap) AS r,
             json_each(r.superseded_stages) AS j) AS u GROUP BY stage
) AS counted
WHERE n > 0
ORDER BY stage, state;

-- name: aging
-- Open invoices per currency and days-past-due bucket on the as_of date, from invoice_open_totals (reminders 0022,
-- kept by triggers on invoices): the rows of differences summed per (currency, due date) first, a group whose
-- invoices all left dropped, then the few thousand groups put in their buckets. Equals aging_from_invoices.
SELECT currency,
       CASE WHEN d <= 0 THEN 'current'
            WHEN d <= 30 THEN '1-30'
            WHEN d <= 60 THEN '31-60'
            WHEN d <= 90 THEN '61-90'
            ELSE '90+' END AS bucket,
       SUM(n) AS invoices, SUM(amount) AS amount
FROM (SELECT currency, CAST(julianday(:as_of) - julianday(due_on) AS INTEGER) AS d, SUM(invoices) AS n, SUM(amount) AS amount
      FROM invoice_open_totals GROUP BY currency, due_on HAVING SUM(invoices) <> 0) AS o
GROUP BY currency, bucket
ORDER BY currency, bucket;

-- name: aging_from_invoices
-- The aging computed from the invoices themselves: what invoice_open_totals (reminders 0022) must always give
-- (tests/acceptance/test_page_reads.py compares the two). Reads every open invoice: not for a page.
-- Grouped per (currency, due date) first, in the order of the partial index invoices_open_aging (a streaming
-- aggregate, no per-invoice bucket text to hash); the few hundred groups are then put in their buckets.
SELECT currency,
       CASE WHEN d <= 0 THEN 'current'
            WHEN d <= 30 THEN '1-30'
            WHEN d <= 60 THEN '31-60'
            WHEN d <= 90 THEN '61-90'
            ELSE '90+' END AS bucket,
       SUM(n) AS invoices, SUM(amount) AS amount
FROM (SELECT currency, CAST(julianday(:as_of) - julianday(due_on) AS INTEGER) AS d, COUNT(*) AS n, SUM(amount_due) AS amount
      FROM invoices WHERE status = 'open' GROUP BY currency, due_on) AS o
GROUP BY currency, bucket
ORDER BY currency, bucket;

-- name: invoices_of_customers
-- The newest invoices of the customers :ids (a JSON array of ids), at most :limit.
SELECT i.*, p.ladder_version_id, c.email, c.name, c.locale, c.tz AS customer_tz, c.country AS customer_country, c.tags AS customer_tags
FROM customers c JOIN invoices i ON i.customer_id = c.id
     LEFT JOIN invoice_pins p ON p.invoice_id = i.id
WHERE c.id IN (SELECT value FROM json_each(:ids))
ORDER BY i.id DESC LIMIT :limit;

-- name: invoice_open_totals_fold
-- The scan's daily fold of invoice_open_totals (reminders 0022): the rows up to the upto id summed per (currency,
-- due date) into new rows (a group that came back to nothing gets none); invoice_open_totals_drop then deletes
-- the rows summed, in the same transaction (SQLite has one writer at a time).
INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
SELECT currency, due_on, SUM(invoices), SUM(amount) FROM invoice_open_totals WHERE id <= :upto
GROUP BY currency, due_on HAVING SUM(invoices) <> 0 OR SUM(amount) <> 0;
