-- Queries of oncebeat.queue_limits, written once for both backends. Parameters are :name.
-- The claim (queue.sql: lock_queue_limit, running_in_queue, claim_jobs) enforces the limits; these set and list.

-- name: set_queue_limit
INSERT INTO queue_limits (queue, max_running, set_at, source_kind, source_host, source_pid, source_name,
                          source_version)
VALUES (:queue, :max_running, :now, :src_kind, :src_host, :src_pid, :src_name, :src_version)
ON CONFLICT (queue) DO UPDATE SET max_running = excluded.max_running, set_at = excluded.set_at,
    source_kind = excluded.source_kind, source_host = excluded.source_host, source_pid = excluded.source_pid,
    source_name = excluded.source_name, source_version = excluded.source_version;

-- name: get_queue_limit
SELECT max_running FROM queue_limits WHERE queue = :queue;

-- name: clear_queue_limit
DELETE FROM queue_limits WHERE queue = :queue
RETURNING max_running;

-- name: list_queue_limits
SELECT * FROM queue_limits ORDER BY queue;
