-- PostgreSQL's versions of the oncebeat.ledger queries that differ from common/ledger.sql (each replaces the
-- block of the same name there); a block not in common/ledger.sql is written for each backend.

-- name: get_schedule
-- FOR SHARE: a fire decided from this row cannot interleave with a concurrent retire/pause/change.
SELECT * FROM schedules WHERE key = :key FOR SHARE;

-- name: last_fire_at
SELECT MAX(fire_at) AS last_fire_at FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual';

-- name: list_schedules_by_key
SELECT * FROM schedules WHERE key = ANY(CAST(:keys AS text[])) ORDER BY key;
