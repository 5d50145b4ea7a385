-- PostgreSQL's versions of the oncebeat.clock queries that differ from common/clock.sql (each replaces the
-- block of the same name there); a block not in common/clock.sql is written for each backend.

-- name: last_fire_at_or_before
-- The clock's cursor: the newest scheduled instant recorded at or before :now. Instants recorded
-- after :now (while a wall clock ran fast) do not hide the ones still missing before them.
SELECT MAX(fire_at) AS last_fire_at FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual' AND fire_at <= :now;
