-- PostgreSQL's versions of the oncebeat.schedules_report queries that differ from common/schedules_report.sql (each replaces the
-- block of the same name there); a block not in common/schedules_report.sql is written for each backend.

-- name: last_fires
SELECT schedule_key, MAX(fire_at) AS last_fire_at FROM occurrences
WHERE outcome <> 'manual' GROUP BY schedule_key;

-- name: occurrence_timeline
-- Newest first, keyset on fire_at; reads the (schedule_key, fire_at) unique index.
SELECT o.*, j.state AS job_state FROM occurrences o LEFT JOIN jobs j ON j.id = o.job_id
WHERE o.schedule_key = :schedule_key AND (CAST(:before AS timestamptz) IS NULL OR o.fire_at < :before)
ORDER BY o.fire_at DESC LIMIT :limit;
