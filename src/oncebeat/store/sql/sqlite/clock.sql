-- SQLite's versions of the oncebeat.clock queries that differ from common/clock.sql (each replaces the
-- block of the same name there); a block not in common/clock.sql is written for each backend.

-- name: last_fire_at_or_before
-- The clock's cursor: the newest scheduled instant recorded at or before :now. Instants recorded
-- after :now (while a wall clock ran fast) do not hide the ones still missing before them.
SELECT MAX(fire_at) AS "last_fire_at [TIMESTAMPTZ]" FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual' AND fire_at <= :now;

-- name: fire_on_time
-- The clock's set-based fire (oncebeat.clock): one statement records the on-time occurrence of many schedules.
-- :rows is one JSON array of [key, version, fire_at, local_fire_at, tz, business_date, floor, first, last,
-- from_at, to_at] (instants as fixed-width UTC text). A row is recorded only when the ledger agrees with the
-- clock's memory (see the PostgreSQL text). SQLite has one writer at a time, so a row that passed is always
-- inserted: only inserted rows are returned, each with its id (never a duplicate).
-- Each occurrence is inserted with the id its run will take (job_id): the ids after the highest the jobs'
-- AUTOINCREMENT has handed out (sqlite_sequence) or any row holds, one per row in order; this writer holds the
-- write lock until it commits, so no other insert takes them. Queue.enqueue_runs_select inserts the jobs under
-- them (which moves sqlite_sequence past them): no update of the occurrence or the job afterwards.
INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, tzdata_version, outcome,
                         job_id, source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT c.key, c.fire_at, c.local_fire_at, c.tz, c.business_date, :tzdata_version, 'enqueued',
       max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0),
           COALESCE((SELECT MAX(id) FROM jobs), 0)) + row_number() OVER (),
       :src_kind, :src_host, :src_pid, :src_name, :src_version, :now
FROM (SELECT json_extract(value, '$[0]') AS key, json_extract(value, '$[1]') AS version,
             json_extract(value, '$[2]') AS fire_at, json_extract(value, '$[3]') AS local_fire_at,
             json_extract(value, '$[4]') AS tz, json_extract(value, '$[5]') AS business_date,
             json_extract(value, '$[6]') AS floor, json_extract(value, '$[7]') AS first,
             json_extract(value, '$[8]') AS last, json_extract(value, '$[9]') AS from_at,
             json_extract(value, '$[10]') AS to_at
      FROM json_each(:rows)) AS c
JOIN schedules s ON s.key = c.key AND s.version = c.version AND s.state = 'active'
WHERE max(COALESCE((SELECT MAX(o.fire_at) FROM occurrences o
                    WHERE o.schedule_key = c.key AND o.outcome <> 'manual' AND o.fire_at <= :horizon),
                   s.active_since), s.active_since) < c.fire_at
  AND max(COALESCE((SELECT MAX(o.fire_at) FROM occurrences o
                    WHERE o.schedule_key = c.key AND o.outcome <> 'manual' AND o.fire_at <= :horizon),
                   s.active_since), s.active_since) >= c.floor
  AND (c.first IS NULL OR NOT EXISTS (
        SELECT 1 FROM occurrences p
        WHERE p.schedule_key = c.key AND p.outcome IN ('enqueued', 'backfilled')
          AND p.fire_at >= c.from_at AND p.fire_at < c.to_at
          AND p.business_date >= c.first AND p.business_date <= c.last))
ON CONFLICT DO NOTHING
RETURNING id, schedule_key, fire_at;

-- name: scheduled_run_sources
-- Source rows (Queue.enqueue_runs_select) of the runs of occurrences :ids: the job id each occurrence names
-- (fire_on_time gave it), each schedule's stored args, and the occurrence served.
SELECT o.job_id AS id, s.args AS args, NULL AS unique_key, o.id AS occurrence_id, o.id AS run_of
FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
WHERE o.id IN (SELECT value FROM json_each(:ids));

-- name: insert_schedules
-- The clock's start-up sync adds many schedules at once. :rows is one JSON array of [key, expression, tz,
-- dst_gap, dst_fold, catchup, catchup_window, overlap, task, args, queue, definition_hash]. Returns the keys
-- added (a key another clock added first is skipped).
INSERT INTO schedules (key, expression, tz, dst_gap, dst_fold, catchup, catchup_window, overlap, task, args,
                       queue, definition_hash, version, state, active_since, created_at, updated_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'),
       json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'),
       json(json_extract(value, '$[9]')), json_extract(value, '$[10]'), json_extract(value, '$[11]'),
       1, 'active', :now, :now, :now
FROM json_each(:rows)
WHERE true
ON CONFLICT DO NOTHING
RETURNING key;

-- name: last_fires_at_or_before
-- The clock's cursors of many schedules at once (see last_fire_at_or_before): one index probe per key.
SELECT s.key, (SELECT MAX(o.fire_at) FROM occurrences o
               WHERE o.schedule_key = s.key AND o.outcome <> 'manual' AND o.fire_at <= :now)
       AS "last_fire_at [TIMESTAMPTZ]"
FROM schedules s WHERE s.key IN (SELECT value FROM json_each(:keys));
