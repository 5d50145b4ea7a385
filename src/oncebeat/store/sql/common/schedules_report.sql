-- Queries of oncebeat.schedules_report, written once for both backends. sqlite/schedules_report.sql and postgres/schedules_report.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: occurrence_timeline
-- Newest first, keyset on fire_at; reads the (schedule_key, fire_at) unique index.
SELECT o.*, j.state AS job_state FROM occurrences o LEFT JOIN jobs j ON j.id = o.job_id
WHERE o.schedule_key = :schedule_key AND (:before IS NULL OR o.fire_at < :before)
ORDER BY o.fire_at DESC LIMIT :limit;
