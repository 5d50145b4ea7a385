-- PostgreSQL's versions of the oncebeat.ledger queries that differ from common/ledger.sql (each replaces the
-- block of the same name there); a block not in common/ledger.sql is written for each backend.

-- name: get_schedule
-- FOR SHARE: a fire decided from this row cannot interleave with a concurrent retire/pause/change.
SELECT * FROM schedules WHERE key = :key FOR SHARE;

-- name: set_schedule_state
UPDATE schedules SET state = :state, updated_at = :now,
    active_since = CASE WHEN CAST(:state AS text) = 'active' THEN :now ELSE active_since END
WHERE key = :key AND state <> :state
RETURNING key;

-- name: last_fire_at
SELECT MAX(fire_at) AS last_fire_at FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual';

-- name: list_occurrences
SELECT * FROM occurrences WHERE (CAST(:schedule_key AS text) IS NULL OR schedule_key = :schedule_key) ORDER BY fire_at, id;
