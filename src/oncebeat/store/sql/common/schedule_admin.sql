-- Queries of oncebeat.schedule_admin, written once for both backends. sqlite/schedule_admin.sql and postgres/schedule_admin.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: override_schedule
-- A run-time edit (schedule_admin.set_schedule): a new version that overrides the code definition :code_hash.
UPDATE schedules
SET expression = :expression, tz = :tz, dst_gap = :dst_gap, dst_fold = :dst_fold, catchup = :catchup,
    catchup_window = :catchup_window, overlap = :overlap, definition_hash = :definition_hash, version = version + 1,
    active_since = :active_since, updated_at = :now, origin = 'runtime', code_hash = :code_hash
WHERE key = :key AND state <> 'retired'
RETURNING version;

-- name: revert_schedule
-- schedule_admin.revert_schedule: the code's definition again, as a new version (origin code, no code_hash).
UPDATE schedules
SET expression = :expression, tz = :tz, dst_gap = :dst_gap, dst_fold = :dst_fold, catchup = :catchup,
    catchup_window = :catchup_window, overlap = :overlap, definition_hash = :definition_hash, version = version + 1,
    active_since = :active_since, updated_at = :now, origin = 'code', code_hash = NULL
WHERE key = :key AND state <> 'retired' AND origin = 'runtime'
RETURNING version;

-- name: insert_rerun_occurrence
INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, tzdata_version, outcome, reason,
                         rerun_of, source_kind, source_host, source_pid, source_name, source_version, created_at)
VALUES (:schedule_key, :fire_at, :local_fire_at, :tz, :business_date, :tzdata_version, 'manual', :reason,
        :rerun_of, :src_kind, :src_host, :src_pid, :src_name, :src_version, :now)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: overlap_holder
-- The unfinished run of a schedule holding the overlap key :key (what an occurrence turned away waits for).
SELECT id, state FROM jobs WHERE unique_key = :key AND state IN ('available', 'scheduled', 'running', 'retryable');

-- name: unfinished_run_of_occurrence
-- The occurrence that occurrence :occurrence_id serves (served: the first of its rerun_of chain, the lowest id on
-- it) and that one's unfinished run (id, state), if any: a job serving it (run_of), or :occurrence_id's own run
-- (one engine migration 0008 left outside the rule, already running, has no run_of). A job a task enqueued
-- carrying the occurrence id is no run of it.
WITH RECURSIVE up(id, parent) AS (
    SELECT id, rerun_of FROM occurrences WHERE id = :occurrence_id
    UNION ALL SELECT o.id, o.rerun_of FROM occurrences o JOIN up ON o.id = up.parent),
r AS (SELECT COALESCE(MIN(COALESCE(parent, id)), :occurrence_id) AS served FROM up)
SELECT r.served, u.id, u.state
FROM r LEFT JOIN (
    SELECT id, state FROM jobs
    WHERE run_of = (SELECT served FROM r) AND state IN ('available', 'scheduled', 'running', 'retryable')
    UNION ALL
    SELECT id, state FROM jobs
    WHERE id = (SELECT job_id FROM occurrences WHERE id = :occurrence_id)
      AND state IN ('available', 'scheduled', 'running', 'retryable')) AS u ON true
ORDER BY u.id LIMIT 1;
