-- PostgreSQL's versions of the oncebeat.clock queries that differ from common/clock.sql (each replaces the
-- block of the same name there); a block not in common/clock.sql is written for each backend.

-- name: last_fire_at_or_before
-- The clock's cursor: the newest scheduled instant recorded at or before :now. Instants recorded
-- after :now (while a wall clock ran fast) do not hide the ones still missing before them.
SELECT MAX(fire_at) AS last_fire_at FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual' AND fire_at <= :now;

-- name: fire_on_time
-- The clock's set-based fire (oncebeat.clock): one statement records the on-time occurrence of many schedules.
-- :rows is one JSON array of [key, version, fire_at, local_fire_at, tz, business_date, floor, first, last,
-- from_at, to_at]. A row is recorded only when the ledger agrees with the clock's memory: the schedule is
-- active at that version, the ledger's cursor (newest scheduled instant at or before :horizon, or
-- active_since if later) lies in [floor, fire_at) — the clock knows no instant of the schedule in
-- (floor, fire_at) — and, for a once-per-period schedule, no run served the period [first, last] yet.
-- Each occurrence is inserted with the id of its run already drawn from the jobs' id sequence (job_id), so
-- Queue.enqueue_runs_select inserts the job under it: no update of the occurrence or the job afterwards.
-- Returns each inserted row with its occurrence id and, only when fewer rows were inserted than passed, every row
-- that passed with a NULL id: a row that passed but was not inserted is an instant a concurrent clock recorded
-- first (a rejected duplicate; its drawn job id is left unused). When all were inserted the passed rows are the
-- inserted ones and are not sent twice (10,000 rows fewer per burst). Rows that did not pass go to the
-- one-schedule path. The insert's only arbiter is the (schedule_key, fire_at) key: the id is the table's own.
WITH cand AS (
    SELECT r ->> 0 AS key, CAST(r ->> 1 AS integer) AS version, CAST(r ->> 2 AS timestamptz) AS fire_at,
           r ->> 3 AS local_fire_at, r ->> 4 AS tz, CAST(r ->> 5 AS date) AS business_date,
           CAST(r ->> 6 AS timestamptz) AS floor, CAST(r ->> 7 AS date) AS first, CAST(r ->> 8 AS date) AS last,
           CAST(r ->> 9 AS timestamptz) AS from_at, CAST(r ->> 10 AS timestamptz) AS to_at
    FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r
), checked AS (
    SELECT c.* FROM cand c
    JOIN schedules s ON s.key = c.key AND s.version = c.version AND s.state = 'active'
    CROSS JOIN LATERAL (SELECT MAX(o.fire_at) AS last_fire FROM occurrences o
                        WHERE o.schedule_key = c.key AND o.outcome <> 'manual'
                          AND o.fire_at <= CAST(:horizon AS timestamptz)) AS l
    WHERE GREATEST(l.last_fire, s.active_since) < c.fire_at
      AND GREATEST(l.last_fire, s.active_since) >= c.floor
      AND (c.first IS NULL OR NOT EXISTS (
            SELECT 1 FROM occurrences p
            WHERE p.schedule_key = c.key AND p.outcome IN ('enqueued', 'backfilled')
              AND p.fire_at >= c.from_at AND p.fire_at < c.to_at
              AND p.business_date >= c.first AND p.business_date <= c.last))
), seq AS (
    SELECT CAST(pg_get_serial_sequence('jobs', 'id') AS regclass) AS jobs_id
), ins AS (
    INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, tzdata_version, outcome,
                             job_id, source_kind, source_host, source_pid, source_name, source_version, created_at)
    SELECT key, fire_at, local_fire_at, tz, business_date, CAST(:tzdata_version AS text), 'enqueued',
           nextval(seq.jobs_id), CAST(:src_kind AS text), CAST(:src_host AS text), CAST(:src_pid AS integer),
           CAST(:src_name AS text), CAST(:src_version AS text), CAST(:now AS timestamptz)
    FROM checked CROSS JOIN seq
    ON CONFLICT (schedule_key, fire_at) DO NOTHING
    RETURNING id, schedule_key, fire_at
)
-- No join of checked with ins (the planner, blind to their sizes, nests loops: 10,000² comparisons): a row of
-- checked without an id whose key has no row with one is the rejected duplicate. The counts are one-time filters.
SELECT key AS schedule_key, fire_at, CAST(NULL AS bigint) AS id FROM checked
WHERE (SELECT count(*) FROM checked) > (SELECT count(*) FROM ins)
UNION ALL
SELECT schedule_key, fire_at, id FROM ins;

-- name: scheduled_run_sources
-- Source rows (Queue.enqueue_runs_select) of the runs of occurrences :ids: the job id each occurrence names
-- (fire_on_time drew it), each schedule's stored args, and the occurrence served.
SELECT o.job_id AS id, s.args AS args, CAST(NULL AS text) AS unique_key, o.id AS occurrence_id, o.id AS run_of
FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
WHERE o.id = ANY(CAST(:ids AS bigint[]));

-- name: insert_schedules
-- The clock's start-up sync adds many schedules at once. :rows is one JSON array of [key, expression, tz,
-- dst_gap, dst_fold, catchup, catchup_window, overlap, task, args, queue, definition_hash]. Returns the keys
-- added (a key another clock added first is skipped).
INSERT INTO schedules (key, expression, tz, dst_gap, dst_fold, catchup, catchup_window, overlap, task, args,
                       queue, definition_hash, version, state, active_since, created_at, updated_at)
SELECT r ->> 0, r ->> 1, r ->> 2, r ->> 3, r ->> 4, r ->> 5, CAST(r ->> 6 AS double precision), r ->> 7, r ->> 8,
       r -> 9, r ->> 10, r ->> 11, 1, 'active', CAST(:now AS timestamptz), CAST(:now AS timestamptz),
       CAST(:now AS timestamptz)
FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r
ON CONFLICT DO NOTHING
RETURNING key;

-- name: last_fires_at_or_before
-- The clock's cursors of many schedules at once (see last_fire_at_or_before): one index probe per key.
SELECT s.key, (SELECT MAX(o.fire_at) FROM occurrences o
               WHERE o.schedule_key = s.key AND o.outcome <> 'manual' AND o.fire_at <= :now) AS last_fire_at
FROM schedules s WHERE s.key = ANY(CAST(:keys AS text[]));
