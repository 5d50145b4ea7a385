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

-- name: unfinished_job_of_occurrence
SELECT id, state FROM jobs
WHERE occurrence_id = :occurrence_id AND state IN ('available', 'scheduled', 'running', 'retryable')
ORDER BY id LIMIT 1;
