-- The reminder queries whose SQL differs on PostgreSQL (the others: common/reminders.sql). Lists and stage
-- ladders arrive as arrays or jsonb; NULL-able parameters are cast.

-- name: upsert_invoice
-- As common/reminders.sql's (fields only, never the status), the same statement.
INSERT INTO invoices (number, customer_id, currency, amount_due, issued_on, due_on, status, paid_on, updated_at,
                      entered_at, payment_url, pdf_path, payment_source)
VALUES (:number, (SELECT id FROM customers WHERE email = :customer_email), :currency, :amount_due, :issued_on,
        :due_on, :status, CAST(:paid_on AS DATE), :now, :now, CAST(:payment_url AS text),
        CAST(:pdf_path AS text), CAST(:payment_source AS text))
ON CONFLICT (number) DO UPDATE SET
    payment_source = COALESCE(excluded.payment_source, invoices.payment_source),
    customer_id = excluded.customer_id, currency = excluded.currency, amount_due = excluded.amount_due,
    issued_on = excluded.issued_on, due_on = excluded.due_on,
    payment_url = CASE WHEN CAST(:payment_url_given AS integer) = 1 THEN excluded.payment_url
                       ELSE invoices.payment_url END,
    pdf_path = CASE WHEN CAST(:pdf_path_given AS integer) = 1 THEN excluded.pdf_path ELSE invoices.pdf_path END,
    paid_on = CASE WHEN invoices.status = 'paid' AND excluded.status = 'paid' THEN excluded.paid_on
                   ELSE invoices.paid_on END,
    updated_at = excluded.updated_at;

-- name: invoice_states
-- Status and payment date of the invoices with these numbers (what an import is about to change).
SELECT id, number, status, paid_on, issued_on FROM invoices WHERE number = ANY(CAST(:numbers AS text[]));

-- name: scan_lock
-- Scans run one at a time per schema (a transaction-level advisory lock, released at commit): a scan sees
-- every reminder an earlier scan committed, so it never creates a stage at or below one already recorded; the
-- invoices trigger of reminders migration 0007 takes the same lock before refusing to delete an invoice that
-- has reminders, so no scan in flight can insert a reminder for an invoice being deleted.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.oncebeat.reminders.scan')) IS NULL AS locked;

-- name: scan_probe_plan
-- Before the scan's inserts (and :on after them): no sequential scan in this transaction's plans while
-- they run. Each insert probes reminders per invoice (its highest stage, a deferred stage) while it fills that
-- table; where the planner trusts statistics of an empty reminders table (a VACUUM ANALYZE before the first scan,
-- often advised after a bulk load) it probes by sequential scan, and every probe then walks every row the
-- statement inserted so far: quadratic in the book (300,000 invoices took 50 s instead of 2; docs/scaling.md).
-- The index on (invoice_id, stage) serves every probe whatever the statistics say; the probes group by invoice so
-- the MAX is not the planner's min/max shortcut, which walked the (stage, state) index instead, filtering by invoice.
SELECT set_config('enable_seqscan', CASE WHEN CAST(:on AS boolean) THEN 'on' ELSE 'off' END, true) AS enable_seqscan;

-- name: scan_insert_reminders
-- :stages is a JSON list of {"stage": N, "cutoff": "YYYY-MM-DD", "business_date": "YYYY-MM-DD", "tz": Z|null}:
-- a stage is due for an invoice when due_on <= cutoff (= business date - N days). tz null: every customer
-- (send_zone = "schedule"); otherwise the row applies to customers whose zone (customer tz, else :default_tz)
-- is Z, with that zone's business date (send_zone = "customer").
-- collapse = "highest": one row per invoice, its highest due stage, pending, when that stage is above every
-- stage the invoice already has (the ladder never goes back); the lower stages that became due with it and
-- were not recorded before go into its superseded_stages (skipped, superseded; never sent later).
-- Each invoice meets exactly one ladder row: the stage whose due dates run from its own cutoff down to (not
-- including) the next higher stage's cutoff; no per-invoice aggregate, one index range scan per stage.
-- Returns one row: reminders created (all pending) and superseded stages recorded.
WITH stages AS (
    SELECT CAST(e ->> 'stage' AS integer) AS stage, CAST(e ->> 'cutoff' AS date) AS cutoff,
           e ->> 'tz' AS tz, CAST(e ->> 'business_date' AS date) AS business_date,
           CAST(e ->> 'lv' AS bigint) AS lv, CAST(e ->> 'nominal' AS integer) AS nominal
    FROM jsonb_array_elements(CAST(:stages AS jsonb)) AS e
), ladder AS (
    SELECT s.stage, s.cutoff, s.tz, s.business_date, s.lv,
           LEAD(s.cutoff) OVER (PARTITION BY s.lv, s.tz ORDER BY s.stage) AS higher_cutoff,
           ARRAY(SELECT l.stage FROM stages l WHERE l.lv = s.lv AND l.tz IS NOT DISTINCT FROM s.tz
                 AND l.stage < s.stage
                 ORDER BY l.stage) AS lower
    FROM stages s
), due AS (
    SELECT i.id AS invoice_id, s.stage, s.business_date, s.lower, s.lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id GROUP BY r.invoice_id) AS last_stage
    FROM ladder s
    JOIN invoices i ON i.due_on <= s.cutoff AND i.due_on > COALESCE(s.higher_cutoff, DATE '-infinity')
      AND EXISTS (SELECT 1 FROM invoice_pins pin WHERE pin.invoice_id = i.id AND pin.ladder_version_id = s.lv)
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE i.status = 'open' AND i.due_on <= CAST(:max_cutoff AS date)
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
), ins AS (
    INSERT INTO reminders (invoice_id, stage, state, reason, superseded_stages, occurrence_id, business_date,
                           created_at, updated_at, ladder_version_id)
    SELECT invoice_id, stage, 'pending', NULL,
           NULLIF(CASE WHEN last_stage IS NULL THEN lower
                       ELSE ARRAY(SELECT x FROM unnest(lower) AS x WHERE x > last_stage ORDER BY x) END, '{}'),
           CAST(:occurrence_id AS bigint), business_date, :now, :now, lv
    FROM due
    WHERE last_stage IS NULL OR stage > last_stage
    ON CONFLICT DO NOTHING
    RETURNING superseded_stages
)
SELECT count(*) AS pending, COALESCE(sum(cardinality(superseded_stages)), 0) AS superseded FROM ins;

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
-- Returns one row: reminders created (all pending) and superseded stages (0).
WITH stages AS MATERIALIZED (
    SELECT CAST(e ->> 'stage' AS integer) AS stage, CAST(e ->> 'cutoff' AS date) AS cutoff,
           e ->> 'tz' AS tz, CAST(e ->> 'business_date' AS date) AS business_date,
           CAST(e ->> 'lv' AS bigint) AS lv, CAST(e ->> 'nominal' AS integer) AS nominal
    FROM jsonb_array_elements(CAST(:stages AS jsonb)) AS e
), open_due AS (
    -- the customer's zone once per invoice (looked up only when the stage rows name zones, send_zone = "customer"),
    -- not once per stage row tried below: 4 stages x 31 zones were 124 lookups per invoice
    SELECT i.id AS invoice_id, i.due_on, pin.ladder_version_id AS lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id GROUP BY r.invoice_id) AS last_stage,
           CASE WHEN EXISTS (SELECT 1 FROM stages WHERE tz IS NOT NULL) THEN
               (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id) END AS zone
    FROM invoices i JOIN invoice_pins pin ON pin.invoice_id = i.id
    WHERE i.status = 'open' AND i.due_on <= CAST(:max_cutoff AS date)
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
), nxt AS (
    -- per invoice the lowest matching stage row (one zone matches, so one business date): a LIMIT 1 over the
    -- few ladder rows, no join of every reached stage followed by a sort and an aggregate
    SELECT i.invoice_id, i.last_stage, n.business_date, n.stage, i.lv, n.nominal
    FROM open_due i
    CROSS JOIN LATERAL (
        SELECT s.stage, s.business_date, s.nominal FROM stages s
        WHERE i.due_on <= s.cutoff AND s.lv = i.lv AND (s.tz IS NULL OR s.tz = i.zone)
          AND (i.last_stage IS NULL OR s.stage > i.last_stage) AND (s.stage > 0 OR i.due_on >= s.business_date)
        ORDER BY s.stage LIMIT 1) AS n
), ready AS (
    SELECT n.invoice_id, n.stage, n.business_date, n.lv FROM nxt n
    LEFT JOIN reminders p ON p.invoice_id = n.invoice_id AND p.stage = n.last_stage
    WHERE n.last_stage IS NULL OR (n.nominal = 1 AND p.business_date < n.business_date)
       OR p.business_date + (n.stage - n.last_stage) <= n.business_date
), ins AS (
    INSERT INTO reminders (invoice_id, stage, state, reason, occurrence_id, business_date, created_at, updated_at,
                           ladder_version_id)
    SELECT invoice_id, stage, 'pending', NULL, CAST(:occurrence_id AS bigint), business_date, :now, :now, lv
    FROM ready
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT count(*) AS pending, 0 AS superseded FROM ins;

-- name: pending_send_jobs
-- The send job of every pending reminder (Queue.enqueue_select inserts them; the unique key skips a reminder
-- whose send job is unfinished), so a reminder whose job was discarded (e.g. its worker died on the last
-- attempt) is retried by the next scan.
-- In reminder order: the jobs' ids (which the claim follows) then agree with the cap's line (cap_waiting: oldest
-- business date, stage, id), so a capped customer's oldest reminder is tried first; without ORDER BY the rows came
-- in physical order, which an update of a reminder row can change (CI saw INV-2's send run before INV-1's).
SELECT jsonb_build_object('reminder_id', r.id) AS args, 'reminder:' || r.id::text AS unique_key, r.occurrence_id
FROM reminders r
WHERE r.state IN ('pending', 'deferred')
ORDER BY r.business_date, r.stage, r.id;

-- name: preview_due
-- What scan_insert_reminders would create (nothing written): per invoice its top stage and how many lower
-- stages it would record superseded.
WITH stages AS (
    SELECT CAST(e ->> 'stage' AS integer) AS stage, CAST(e ->> 'cutoff' AS date) AS cutoff,
           e ->> 'tz' AS tz, CAST(e ->> 'business_date' AS date) AS business_date,
           CAST(e ->> 'lv' AS bigint) AS lv, CAST(e ->> 'nominal' AS integer) AS nominal
    FROM jsonb_array_elements(CAST(:stages AS jsonb)) AS e
), ladder AS (
    SELECT s.stage, s.cutoff, s.tz, s.business_date, s.lv,
           LEAD(s.cutoff) OVER (PARTITION BY s.lv, s.tz ORDER BY s.stage) AS higher_cutoff,
           ARRAY(SELECT l.stage FROM stages l WHERE l.lv = s.lv AND l.tz IS NOT DISTINCT FROM s.tz
                 AND l.stage < s.stage
                 ORDER BY l.stage) AS lower
    FROM stages s
), due AS (
    SELECT i.id AS invoice_id, s.stage, s.lower, s.lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id GROUP BY r.invoice_id) AS last_stage
    FROM ladder s
    JOIN invoices i ON i.due_on <= s.cutoff AND i.due_on > COALESCE(s.higher_cutoff, DATE '-infinity')
      AND EXISTS (SELECT 1 FROM invoice_pins pin WHERE pin.invoice_id = i.id AND pin.ladder_version_id = s.lv)
      AND (s.tz IS NULL OR s.tz = (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id))
    WHERE i.status = 'open' AND i.due_on <= CAST(:max_cutoff AS date)
      -- a stage deferred by the cap (reminders 0013) holds back the invoice's later stages: stage order kept
      AND NOT EXISTS (SELECT 1 FROM reminders d WHERE d.invoice_id = i.id AND d.state = 'deferred')
)
SELECT i.number, c.email, c.name, i.currency, i.amount_due, i.due_on, d.lv, d.stage,
       cardinality(ARRAY(SELECT x FROM unnest(d.lower) AS x WHERE d.last_stage IS NULL OR x > d.last_stage))
           AS superseded
FROM due d JOIN invoices i ON i.id = d.invoice_id JOIN customers c ON c.id = i.customer_id
WHERE d.last_stage IS NULL OR d.stage > d.last_stage
ORDER BY i.due_on, i.number;

-- name: preview_next_due
-- What scan_insert_next_reminders would create (nothing written).
WITH stages AS (
    SELECT CAST(e ->> 'stage' AS integer) AS stage, CAST(e ->> 'cutoff' AS date) AS cutoff,
           e ->> 'tz' AS tz, CAST(e ->> 'business_date' AS date) AS business_date,
           CAST(e ->> 'lv' AS bigint) AS lv, CAST(e ->> 'nominal' AS integer) AS nominal
    FROM jsonb_array_elements(CAST(:stages AS jsonb)) AS e
), open_due AS (
    -- the customer's zone once per invoice (looked up only when the stage rows name zones, send_zone = "customer"),
    -- not once per stage row tried below: 4 stages x 31 zones were 124 lookups per invoice
    SELECT i.id AS invoice_id, i.due_on, pin.ladder_version_id AS lv,
           (SELECT MAX(r.stage) FROM reminders r WHERE r.invoice_id = i.id GROUP BY r.invoice_id) AS last_stage,
           CASE WHEN EXISTS (SELECT 1 FROM stages WHERE tz IS NOT NULL) THEN
               (SELECT COALESCE(NULLIF(c.tz, ''), :default_tz) FROM customers c WHERE c.id = i.customer_id) END AS zone
    FROM invoices i JOIN invoice_pins pin ON pin.invoice_id = i.id
    WHERE i.status = 'open' AND i.due_on <= CAST(:max_cutoff AS date)
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
    WHERE n.last_stage IS NULL OR (n.nominal = 1 AND p.business_date < n.business_date)
       OR p.business_date + (n.stage - n.last_stage) <= n.business_date
)
SELECT i.number, c.email, c.name, i.currency, i.amount_due, i.due_on, r.lv, r.stage, 0 AS superseded
FROM ready r JOIN invoices i ON i.id = r.invoice_id JOIN customers c ON c.id = i.customer_id
ORDER BY i.due_on, i.number;

-- name: reminder_counts
-- Reminders per stage and state (index reminders_stage_state); a stage recorded superseded in a higher stage's
-- row (superseded_stages, reminders 0007) counts as skipped.
SELECT stage, state, CAST(SUM(n) AS BIGINT) AS n FROM (
    SELECT stage, state, COUNT(*) AS n FROM reminders GROUP BY stage, state
    UNION ALL
    SELECT s.stage, 'skipped', COUNT(*) FROM reminders r CROSS JOIN LATERAL unnest(r.superseded_stages) AS s (stage)
    WHERE r.superseded_stages IS NOT NULL GROUP BY s.stage
) AS c
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
        SELECT s.stage FROM (SELECT superseded_stages FROM reminders WHERE superseded_stages IS NOT NULL
                             ORDER BY id LIMIT :cap) AS r
        CROSS JOIN LATERAL unnest(r.superseded_stages) AS s (stage)) AS u GROUP BY stage
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
FROM (SELECT currency, CAST(:as_of AS date) - due_on AS d, SUM(invoices) AS n, SUM(amount) AS amount
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
FROM (SELECT currency, CAST(:as_of AS date) - due_on AS d, COUNT(*) AS n, SUM(amount_due) AS amount
      FROM invoices WHERE status = 'open' GROUP BY currency, due_on) AS o
GROUP BY currency, bucket
ORDER BY currency, bucket;

-- name: move_invoice_status
-- THE status transition rule: common/reminders.sql's, with the NULL-able parameters cast.
UPDATE invoices SET status = :status, paid_on = CAST(:paid_on AS DATE),
    paid_at = CASE WHEN CAST(:status AS TEXT) = 'paid' THEN CAST(:now AS TIMESTAMPTZ) ELSE NULL END,
    updated_at = :now
WHERE number = :number AND status <> CAST(:status AS TEXT)
  AND (status = 'open'
       OR (status = 'uncollectible' AND CAST(:status AS TEXT) IN ('paid', 'void'))
       OR (status = 'paid' AND CAST(:status AS TEXT) = 'open' AND CAST(:status_on AS DATE) > paid_on)
       OR CAST(:reopen AS BOOLEAN));

-- name: invoices_of_customers
-- The newest invoices of the customers :ids (a JSON array of ids), at most :limit.
SELECT i.*, p.ladder_version_id, c.email, c.name, c.locale, c.tz AS customer_tz, c.country AS customer_country, c.tags AS customer_tags
FROM customers c JOIN invoices i ON i.customer_id = c.id
     LEFT JOIN invoice_pins p ON p.invoice_id = i.id
WHERE c.id IN (SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb)))
ORDER BY i.id DESC LIMIT :limit;

-- name: invoice_open_totals_fold
-- The scan's daily fold of invoice_open_totals (reminders 0022): the rows up to the upto id become one row per
-- (currency, due date), a group that came back to nothing none. One statement, one snapshot: a row a concurrent
-- write adds meanwhile (even one with a lower id, committed later) is neither deleted nor counted, and stays for
-- the next fold. (SQLite folds in two statements: invoice_open_totals_drop follows there, not here.)
WITH folded AS (DELETE FROM invoice_open_totals WHERE id <= :upto RETURNING currency, due_on, invoices, amount)
INSERT INTO invoice_open_totals (currency, due_on, invoices, amount)
SELECT currency, due_on, SUM(invoices), SUM(amount) FROM folded GROUP BY currency, due_on
HAVING SUM(invoices) <> 0 OR SUM(amount) <> 0;
