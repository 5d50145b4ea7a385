-- PostgreSQL's versions of the oncebeat.schedules_report queries that differ from common/schedules_report.sql (each replaces the
-- block of the same name there); a block not in common/schedules_report.sql is written for each backend.

-- name: last_fires
SELECT schedule_key, MAX(fire_at) AS last_fire_at FROM occurrences
WHERE outcome <> 'manual' GROUP BY schedule_key;

-- name: last_manual_runs
-- The newest manual run (trigger, re-run) per schedule: the schedules page shows it beside the last fire.
SELECT schedule_key, MAX(fire_at) AS last_run_at FROM occurrences
WHERE outcome = 'manual' GROUP BY schedule_key;

-- name: occurrence_timeline
-- Newest first, keyset on fire_at; reads the (schedule_key, fire_at) unique index. busy_job_id / busy_job_state:
-- the unfinished run of the occurrence the row serves (its job's run_of: for a re-run, the occurrence first re-run),
-- if any: while it is unfinished the occurrence is not run again.
SELECT o.*, j.state AS job_state, u.id AS busy_job_id, u.state AS busy_job_state
FROM occurrences o LEFT JOIN jobs j ON j.id = o.job_id
LEFT JOIN jobs u ON u.run_of = COALESCE(j.run_of, o.id) AND u.state IN ('available', 'scheduled', 'running', 'retryable')
WHERE o.schedule_key = :schedule_key AND (CAST(:before AS timestamptz) IS NULL OR o.fire_at < :before)
ORDER BY o.fire_at DESC LIMIT :limit;
