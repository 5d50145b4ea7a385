-- Queries of oncebeat.effects, written once for both backends. sqlite/effects.sql and postgres/effects.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: job_holder_alive
SELECT 1 AS alive FROM jobs
WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
  AND lease_expires_at >= :now;

-- name: effect_holder_current
-- Fencing: a job attempt claims an effect only while it is the job's current holder with an unexpired lease
-- (the predicate job_holder_alive gives everyone else). Read in the claim's transaction, which keeps
-- the rescue off the job until the claim commits (BEGIN IMMEDIATE already serialises writers).
SELECT 1 AS current FROM jobs
WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
  AND lease_expires_at >= :now;

-- name: effect_claim
INSERT INTO effects (key, state, payload_hash, job_id, attempt, process_id, source_kind, source_host, source_pid,
                     source_name, source_version, started_at, no_return_at, frozen)
VALUES (:key, 'started', :payload_hash, :job_id, :attempt, :process_id, :src_kind, :src_host, :src_pid,
        :src_name, :src_version, :now, :no_return_at, :frozen)
ON CONFLICT DO NOTHING
RETURNING key;

-- name: effect_claim_current
-- effect_holder_current and effect_claim in one statement (a round trip per effect fewer on PostgreSQL, whose
-- version also locks the job row): inserted only while the job attempt holds its job with an unexpired lease.
-- No row: the attempt lost its job or the key exists (the caller tells which). The WHERE is also what lets
-- SQLite read ON CONFLICT after INSERT … SELECT.
INSERT INTO effects (key, state, payload_hash, job_id, attempt, process_id, source_kind, source_host, source_pid,
                     source_name, source_version, started_at, no_return_at, frozen)
SELECT :key, 'started', :payload_hash, :job_id, :attempt, :process_id, :src_kind, :src_host, :src_pid,
       :src_name, :src_version, :now, :no_return_at, :frozen
WHERE EXISTS (SELECT 1 FROM jobs
              WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
                AND lease_expires_at >= :now)
ON CONFLICT DO NOTHING
RETURNING key;

-- name: effect_get
SELECT * FROM effects WHERE key = :key;

-- name: effect_finish
-- A done effect drops its frozen input: nothing will ever send it again.
UPDATE effects SET state = :state, result = :result, detail = :detail, finished_at = :now,
    frozen = CASE WHEN :state = 'done' THEN NULL ELSE frozen END
WHERE key = :key AND state = :from_state AND COALESCE(job_id, -1) = COALESCE(CAST(:job_id AS bigint), -1)
  AND COALESCE(attempt, -1) = COALESCE(CAST(:attempt AS integer), -1)
RETURNING key;

-- name: effect_take_over
-- The input frozen at the first attempt is kept (a retry sends exactly that); a row without one gets :frozen.
UPDATE effects SET state = 'started', job_id = :job_id, attempt = :attempt, process_id = :process_id,
    started_at = :now, finished_at = NULL, detail = :detail, no_return_at = :no_return_at,
    frozen = COALESCE(frozen, :frozen)
WHERE key = :key AND state = :from_state
RETURNING key, frozen;

-- name: effect_mark_in_doubt
UPDATE effects SET state = 'in_doubt', detail = :detail, finished_at = :now
WHERE key = :key AND state = 'started'
RETURNING key;

-- name: effect_no_return
-- The holder passed its point of no return: from now on its death leaves the key in doubt.
UPDATE effects SET no_return_at = :now
WHERE key = :key AND state = 'started' AND COALESCE(job_id, -1) = COALESCE(CAST(:job_id AS bigint), -1)
  AND COALESCE(attempt, -1) = COALESCE(CAST(:attempt AS integer), -1)
RETURNING key;

-- name: list_effects
SELECT * FROM effects WHERE (CAST(:state AS text) IS NULL OR state = :state) ORDER BY started_at, key;

-- name: count_unfinished_effects
SELECT state, COUNT(*) AS n FROM effects WHERE state <> 'done' GROUP BY state ORDER BY state;

-- name: list_effects_page
-- Oldest first (the longest-waiting decision on top), keyset on (started_at, key).
SELECT * FROM effects
WHERE (:state IS NULL OR state = :state)
  AND (:after_at IS NULL OR (started_at, key) > (:after_at, :after_key))
ORDER BY started_at, key LIMIT :limit;

-- name: effects_of_job
SELECT * FROM effects WHERE job_id = :job_id ORDER BY started_at, key;
