-- SQLite's versions of the oncebeat.ledger queries that differ from common/ledger.sql (each replaces the
-- block of the same name there); a block not in common/ledger.sql is written for each backend.

-- name: last_fire_at
SELECT MAX(fire_at) AS "last_fire_at [TIMESTAMPTZ]" FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual';

-- name: list_schedules_by_key
SELECT * FROM schedules WHERE key IN (SELECT value FROM json_each(:keys)) ORDER BY key;
