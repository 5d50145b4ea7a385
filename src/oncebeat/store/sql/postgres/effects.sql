-- PostgreSQL's versions of the oncebeat.effects queries that differ from common/effects.sql (each replaces the
-- block of the same name there); a block not in common/effects.sql is written for each backend.

-- name: effect_holder_current
-- Fencing: a job attempt claims an effect only while it is the job's current holder with an unexpired lease
-- (the predicate job_holder_alive gives everyone else). Read in the claim's transaction, which keeps
-- the rescue (FOR UPDATE SKIP LOCKED) off the job until the claim commits, without blocking the heartbeat.
SELECT 1 AS current FROM jobs
WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
  AND lease_expires_at >= :now
FOR KEY SHARE;

-- name: effect_claim_current
-- effect_holder_current and effect_claim in one statement (a round trip per effect fewer, issue 27): inserted
-- only while the job attempt holds its job with an unexpired lease, the job row then locked against the rescue
-- until the transaction commits. No row: the attempt lost its job or the key exists (the caller tells which).
INSERT INTO effects (key, state, payload_hash, job_id, attempt, process_id, source_kind, source_host, source_pid,
                     source_name, source_version, started_at, no_return_at, frozen)
SELECT :key, 'started', :payload_hash, :job_id, :attempt, :process_id, :src_kind, :src_host, :src_pid,
       :src_name, :src_version, :now, :no_return_at, :frozen
WHERE EXISTS (SELECT 1 FROM jobs
              WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
                AND lease_expires_at >= :now
              FOR KEY SHARE)
ON CONFLICT DO NOTHING
RETURNING key;

-- name: list_effects_page
-- Oldest first (the longest-waiting decision on top), keyset on (started_at, key).
SELECT * FROM effects
WHERE (CAST(:state AS text) IS NULL OR state = :state)
  AND (CAST(:after_at AS timestamptz) IS NULL OR (started_at, key) > (CAST(:after_at AS timestamptz), CAST(:after_key AS text)))
ORDER BY started_at, key LIMIT :limit;
