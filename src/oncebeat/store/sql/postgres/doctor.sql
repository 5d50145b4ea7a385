-- PostgreSQL's versions of the doctor queries that differ from common/doctor.sql, or have no common form. Lists
-- arrive as arrays; NULL-able parameters are cast.

-- name: doctor_process_activity
SELECT process_id, MIN(at) AS first_at, MAX(at) AS last_at, COUNT(*) AS n
FROM events WHERE process_id IS NOT NULL
GROUP BY process_id;

-- name: doctor_events
SELECT * FROM events
WHERE at >= :since AND kind = ANY(CAST(:kinds AS text[]))
ORDER BY id;

-- name: doctor_events_for_subjects
SELECT * FROM events WHERE subject = ANY(CAST(:subjects AS text[])) ORDER BY id;

-- name: doctor_events_about_occurrence
SELECT * FROM events
WHERE subject = :subject
  AND (detail ->> 'fire_at' = CAST(:fire_at_iso AS text)
       OR detail ->> 'occurrence_id' = CAST(:occurrence_id AS text)
       OR (kind = 'clock.catchup' AND at = :created_at))
ORDER BY id;

-- name: doctor_events_returning_job
SELECT * FROM events
WHERE kind = 'job.returned' AND detail -> 'jobs' @> to_jsonb(CAST(:job_id AS bigint))
ORDER BY id;

-- name: doctor_future_events
SELECT process_id, source_host, source_pid, source_name, source_version, COUNT(*) AS n, MAX(at) AS last_at
FROM events WHERE at > :after
GROUP BY process_id, source_host, source_pid, source_name, source_version
ORDER BY 7 DESC;

-- name: doctor_occurrences_by_ids
SELECT * FROM occurrences WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id;

-- name: doctor_occurrence_sources
SELECT source_host, source_pid, source_name, source_version, source_kind, schedule_key, COUNT(*) AS n,
       MIN(created_at) AS first_at, MAX(created_at) AS last_at
FROM occurrences WHERE created_at >= :since
GROUP BY source_host, source_pid, source_name, source_version, source_kind, schedule_key
ORDER BY 8;

-- name: doctor_same_day_fires
SELECT business_date, COUNT(*) AS n FROM occurrences
WHERE schedule_key = :schedule_key AND created_at >= :since AND outcome IN ('enqueued', 'backfilled')
GROUP BY business_date HAVING COUNT(*) > 1
ORDER BY business_date;

-- name: doctor_occurrences_on_date
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND business_date = CAST(:business_date AS date)
ORDER BY fire_at, id;

-- name: doctor_jobs_by_ids
SELECT * FROM jobs WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id;

-- name: doctor_jobs_of_occurrences
SELECT * FROM jobs WHERE occurrence_id = ANY(CAST(:ids AS bigint[])) ORDER BY id;

-- name: doctor_jobs_by_unique_keys
SELECT * FROM jobs WHERE unique_key = ANY(CAST(:keys AS text[])) ORDER BY id;

-- name: doctor_triggered_jobs
SELECT * FROM jobs
WHERE created_at >= :since AND source_kind IN ('manual', 'cli', 'api') AND task = ANY(CAST(:tasks AS text[]))
ORDER BY created_at, id;

-- name: doctor_effects_of_jobs
SELECT * FROM effects WHERE job_id = ANY(CAST(:ids AS bigint[])) ORDER BY started_at, key;

-- name: doctor_effects_by_keys
SELECT * FROM effects WHERE key = ANY(CAST(:keys AS text[])) ORDER BY started_at, key;
