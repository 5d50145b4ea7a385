-- SQLite's versions of the oncebeat.effects queries that differ from common/effects.sql (each replaces the
-- block of the same name there); a block not in common/effects.sql is written for each backend.

-- name: jobs_in_doubt
SELECT * FROM jobs INDEXED BY jobs_in_doubt WHERE state = 'in_doubt' ORDER BY id;

-- name: job_rerun
-- An operator judged an in-doubt effect not done: the job runs again (one more attempt allowed), unless another
-- unfinished job holds its unique key (that one will run the effect).
UPDATE jobs
SET state = 'available', run_at = :now, finished_at = NULL, lease_expires_at = NULL, worker_id = NULL,
    max_attempts = MAX(max_attempts, attempt + 1), errors = json_insert(errors, '$[#]', json(:entry))
WHERE id = :id AND state = :from_state
  AND (unique_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM jobs other WHERE other.unique_key = jobs.unique_key AND other.id <> jobs.id
        AND other.state IN ('available', 'scheduled', 'running', 'retryable')))
RETURNING id;

-- name: job_close_in_doubt
-- Every in-doubt effect of the job was resolved: it ends completed (the resolution appended to its errors).
UPDATE jobs SET state = 'completed', finished_at = :now, errors = json_insert(errors, '$[#]', json(:entry))
WHERE id = :id AND state = 'in_doubt'
RETURNING id;
