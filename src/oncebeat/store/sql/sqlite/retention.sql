-- The retention blocks that differ on SQLite: those that take a list (a JSON array read with json_each; the same
-- names as postgres/retention.sql), and a probe that names its index.

-- name: retention_prunable_effects
-- Finished effects (done or failed) only; keys under a protected prefix (an app's, e.g. the reminder app's
-- `reminder:`) stay while the app needs them.
SELECT e.key FROM effects e
WHERE e.key > :after AND e.key <= :hi AND e.state IN ('done', 'failed') AND e.finished_at < :before
  AND NOT EXISTS (SELECT 1 FROM json_each(:keep) k WHERE substr(e.key, 1, length(k.value)) = k.value);

-- name: prune_jobs
DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('completed', 'discarded', 'cancelled') RETURNING id;

-- name: prune_occurrences
DELETE FROM occurrences WHERE id IN (SELECT value FROM json_each(:ids)) RETURNING id;

-- name: prune_retained_events
DELETE FROM events WHERE id IN (SELECT value FROM json_each(:ids)) RETURNING id;

-- name: prune_processes
DELETE FROM processes WHERE id IN (SELECT value FROM json_each(:ids))
  AND COALESCE(stopped_at, heartbeat_at) < :before RETURNING id;

-- name: prune_effects
DELETE FROM effects WHERE key IN (SELECT value FROM json_each(:keys)) AND state IN ('done', 'failed') RETURNING key;

-- name: retention_prunable_processes
-- As common/retention.sql; the running-job probe is INDEXED BY jobs_running_lease (running jobs only): since
-- engine 0014 `state = 'running'` also implies jobs_unfinished_queue's condition, and without statistics SQLite
-- would walk that one, every unclaimed job of a backlog included, once per process.
SELECT p.id FROM processes p
WHERE p.id > :after AND p.id <= :hi AND COALESCE(p.stopped_at, p.heartbeat_at) < :before
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.state <> 'done' AND e.process_id = p.id)
  AND NOT EXISTS (SELECT 1 FROM jobs j INDEXED BY jobs_running_lease WHERE j.state = 'running' AND j.worker_id = p.id)
  AND NOT EXISTS (SELECT 1 FROM occurrences o WHERE o.source_host = p.host AND o.source_pid = p.pid);
