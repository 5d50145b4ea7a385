-- SQLite's versions of the doctor queries that differ from common/doctor.sql, or have no common form. Lists
-- arrive as JSON text (json_each()); aggregates carry "[TIMESTAMPTZ]"/"[DATE]" in their alias so that they come
-- back as Python values.

-- name: doctor_process_activity
SELECT process_id, MIN(at) AS "first_at [TIMESTAMPTZ]", MAX(at) AS "last_at [TIMESTAMPTZ]", COUNT(*) AS n
FROM events WHERE process_id IS NOT NULL
GROUP BY process_id;

-- name: doctor_events
SELECT * FROM events
WHERE at >= :since AND kind IN (SELECT value FROM json_each(:kinds))
ORDER BY id;

-- name: doctor_events_for_subjects
SELECT * FROM events WHERE subject IN (SELECT value FROM json_each(:subjects)) ORDER BY id;

-- name: doctor_events_about_occurrence
SELECT * FROM events
WHERE subject = :subject
  AND (json_extract(detail, '$.fire_at') = :fire_at_iso
       OR json_extract(detail, '$.occurrence_id') = :occurrence_id
       OR (kind = 'clock.catchup' AND at = :created_at))
ORDER BY id;

-- name: doctor_events_returning_job
SELECT * FROM events
WHERE kind = 'job.returned' AND EXISTS (SELECT 1 FROM json_each(events.detail, '$.jobs') WHERE value = :job_id)
ORDER BY id;

-- name: doctor_future_events
SELECT process_id, source_host, source_pid, source_name, source_version, COUNT(*) AS n,
       MAX(at) AS "last_at [TIMESTAMPTZ]"
FROM events WHERE at > :after
GROUP BY process_id, source_host, source_pid, source_name, source_version
ORDER BY 7 DESC;

-- name: doctor_occurrences_by_ids
SELECT * FROM occurrences WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: doctor_occurrence_sources
SELECT source_host, source_pid, source_name, source_version, source_kind, schedule_key, COUNT(*) AS n,
       MIN(created_at) AS "first_at [TIMESTAMPTZ]", MAX(created_at) AS "last_at [TIMESTAMPTZ]"
FROM occurrences WHERE created_at >= :since
GROUP BY source_host, source_pid, source_name, source_version, source_kind, schedule_key
ORDER BY 8;

-- name: doctor_same_day_fires
SELECT business_date AS "business_date [DATE]", COUNT(*) AS n FROM occurrences
WHERE schedule_key = :schedule_key AND created_at >= :since AND outcome IN ('enqueued', 'backfilled')
GROUP BY business_date HAVING COUNT(*) > 1
ORDER BY business_date;

-- name: doctor_jobs_by_ids
SELECT * FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: doctor_jobs_of_occurrences
SELECT * FROM jobs WHERE occurrence_id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: doctor_jobs_by_unique_keys
SELECT * FROM jobs WHERE unique_key IN (SELECT value FROM json_each(:keys)) ORDER BY id;

-- name: doctor_triggered_jobs
SELECT * FROM jobs
WHERE created_at >= :since AND source_kind IN ('manual', 'cli', 'api')
  AND task IN (SELECT value FROM json_each(:tasks))
ORDER BY created_at, id;

-- name: doctor_effects_of_jobs
SELECT * FROM effects WHERE job_id IN (SELECT value FROM json_each(:ids)) ORDER BY started_at, key;

-- name: doctor_effects_by_keys
SELECT * FROM effects WHERE key IN (SELECT value FROM json_each(:keys)) ORDER BY started_at, key;
