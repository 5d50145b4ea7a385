-- The retention blocks that take a list (SQLite: a JSON array read with json_each; the same names as
-- postgres/retention.sql).

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
