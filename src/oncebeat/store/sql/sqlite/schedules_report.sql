-- SQLite's versions of the oncebeat.schedules_report queries that differ from common/schedules_report.sql (each replaces the
-- block of the same name there); a block not in common/schedules_report.sql is written for each backend.

-- name: last_fires
SELECT schedule_key, MAX(fire_at) AS "last_fire_at [TIMESTAMPTZ]" FROM occurrences
WHERE outcome <> 'manual' GROUP BY schedule_key;

-- name: last_manual_runs
-- The newest manual run (trigger, re-run) per schedule: the schedules page shows it beside the last fire.
SELECT schedule_key, MAX(fire_at) AS "last_run_at [TIMESTAMPTZ]" FROM occurrences
WHERE outcome = 'manual' GROUP BY schedule_key;
