-- The retention blocks that take a list (PostgreSQL: arrays; the same names as sqlite/retention.sql).

-- name: retention_prunable_effects
-- Finished effects (done or failed) only; keys under a protected prefix (an app's, e.g. the reminder app's
-- `reminder:`) stay while the app needs them.
SELECT e.key FROM effects e
WHERE e.key > :after AND e.key <= :hi AND e.state IN ('done', 'failed') AND e.finished_at < :before
  AND NOT EXISTS (SELECT 1 FROM unnest(CAST(:keep AS text[])) AS k(p) WHERE substr(e.key, 1, length(k.p)) = k.p);

-- name: prune_jobs
DELETE FROM jobs WHERE id = ANY(CAST(:ids AS bigint[]))
  AND state IN ('completed', 'discarded', 'cancelled') RETURNING id;

-- name: prune_occurrences
DELETE FROM occurrences WHERE id = ANY(CAST(:ids AS bigint[])) RETURNING id;

-- name: prune_retained_events
DELETE FROM events WHERE id = ANY(CAST(:ids AS bigint[])) RETURNING id;

-- name: prune_processes
DELETE FROM processes WHERE id = ANY(CAST(:ids AS bigint[]))
  AND COALESCE(stopped_at, heartbeat_at) < :before RETURNING id;

-- name: prune_effects
DELETE FROM effects WHERE key = ANY(CAST(:keys AS text[])) AND state IN ('done', 'failed') RETURNING key;
