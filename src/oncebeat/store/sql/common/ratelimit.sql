-- Rate limits (oncebeat.ratelimit): a sliding log of permits per key, taken one at a time per key.

-- name: rate_limit_lock
-- Serialises the takes of one key: PostgreSQL row-locks the key's row until commit; SQLite already holds the
-- write lock (BEGIN IMMEDIATE). Records the limit last asked for (what operators see).
INSERT INTO rate_limits (key, max_count, per_seconds, updated_at) VALUES (:key, :max_count, :per_seconds, :now)
ON CONFLICT (key) DO UPDATE SET max_count = excluded.max_count, per_seconds = excluded.per_seconds,
                                updated_at = excluded.updated_at;

-- name: rate_permits_prune
-- Permits that no longer count in any window of the key's period.
DELETE FROM rate_permits WHERE key = :key AND until <= :horizon;

-- name: rate_permits_count
SELECT count(*) AS n FROM rate_permits WHERE key = :key AND until > :horizon;

-- name: rate_permits_nth_until
-- The until of the (:skip + 1)-th permit to stop counting: once it leaves the window a permit is free again.
SELECT until FROM rate_permits WHERE key = :key AND until > :horizon ORDER BY until, id LIMIT 1 OFFSET :skip;

-- name: rate_permit_insert
INSERT INTO rate_permits (key, taken_at, until, job_id) VALUES (:key, :now, :until, CAST(:job_id AS bigint))
RETURNING id;

-- name: rate_permit_release
-- The permitted action has ended: it counts from its end (later than the pessimistic bound if it took longer).
UPDATE rate_permits SET until = :until WHERE id = :id;

-- name: rate_permits_of_key
SELECT id, key, taken_at, until, job_id FROM rate_permits WHERE key = :key ORDER BY taken_at, id;

-- name: rate_limit_usage
-- Per limited key: its limit and the permits still counting at :now (the /metrics gauges). Reads
-- rate_permits_key_until per key.
SELECT l.key, l.max_count, l.per_seconds,
       (SELECT COUNT(*) FROM rate_permits p WHERE p.key = l.key AND p.until > :now) AS in_use
FROM rate_limits l ORDER BY l.key;
