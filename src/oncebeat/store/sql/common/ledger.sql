-- The schedule rows and the occurrence ledger: reads (and the two small writes) that several engine modules run
-- today; step 3 of issue 11 gives them one owner module. Written once for both backends; sqlite/ledger.sql and
-- postgres/ledger.sql hold only the blocks that differ. Parameters are :name.

-- name: list_schedules
SELECT * FROM schedules ORDER BY key;

-- name: schedule_versions
SELECT key, version, state FROM schedules;

-- name: get_schedule
SELECT * FROM schedules WHERE key = :key;

-- name: set_schedule_state
UPDATE schedules SET state = :state, updated_at = :now,
    active_since = CASE WHEN CAST(:state AS text) = 'active' THEN :now ELSE active_since END
WHERE key = :key AND state <> :state
RETURNING key;

-- name: get_occurrence_by_instant
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND fire_at = :fire_at;

-- name: set_occurrence_job
UPDATE occurrences SET job_id = :job_id WHERE id = :id;

-- name: job_runs_occurrence
-- Job :job_id is occurrence :id's run: it serves (run_of) the first occurrence of :id's rerun_of chain (the lowest
-- id on it; :id itself unless it is a make-up run). The partial unique index jobs_one_run_per_occurrence refuses
-- it while another run of that occurrence is unfinished.
UPDATE jobs SET run_of = (
    WITH RECURSIVE up(id, parent) AS (
        SELECT id, rerun_of FROM occurrences WHERE id = :id
        UNION ALL SELECT o.id, o.rerun_of FROM occurrences o JOIN up ON o.id = up.parent)
    SELECT COALESCE(MIN(COALESCE(parent, id)), :id) FROM up)
WHERE id = :job_id;

-- name: get_occurrence
SELECT * FROM occurrences WHERE id = :id;

-- name: list_occurrences
SELECT * FROM occurrences WHERE (CAST(:schedule_key AS text) IS NULL OR schedule_key = :schedule_key) ORDER BY fire_at, id;
