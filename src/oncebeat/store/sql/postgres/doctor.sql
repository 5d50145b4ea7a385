-- Read-only queries of the doctor (PostgreSQL), plus the audit-trail retention count.
-- Same names as sqlite/doctor.sql. Lists arrive as arrays; NULL-able parameters are cast.

-- name: doctor_db_now
-- The server's clock (transaction start), the reference the clock-skew check compares processes with.
SELECT now() AS db_now;

-- name: doctor_processes
SELECT * FROM processes
WHERE stopped_at IS NULL OR stopped_at >= :since
ORDER BY started_at, id;

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

-- name: doctor_count_events_before
SELECT COUNT(*) AS n FROM events WHERE at < :before;

-- name: doctor_occurrences_by_ids
SELECT * FROM occurrences WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id;

-- name: doctor_triggered_occurrences
SELECT * FROM occurrences
WHERE created_at >= :since AND (outcome IN ('manual', 'backfilled') OR source_kind IN ('manual', 'cli', 'api'))
ORDER BY created_at, id;

-- name: doctor_occurrence_sources
SELECT source_host, source_pid, source_name, source_version, source_kind, schedule_key, COUNT(*) AS n,
       MIN(created_at) AS first_at, MAX(created_at) AS last_at
FROM occurrences WHERE created_at >= :since
GROUP BY source_host, source_pid, source_name, source_version, source_kind, schedule_key
ORDER BY 8;

-- name: doctor_occurrences_without_job
-- A manual run the schedule's overlap policy turned away keeps outcome 'manual' without a job, by design
-- (its reason starts 'overlap:', oncebeat.clock.OVERLAP_RUNNING / OVERLAP_FULL): not a lost run.
SELECT * FROM occurrences
WHERE created_at >= :since AND outcome IN ('enqueued', 'manual', 'backfilled') AND job_id IS NULL
  AND (reason IS NULL OR reason NOT LIKE 'overlap:%')
ORDER BY fire_at, id;

-- name: doctor_occurrences_after
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND created_at > :after ORDER BY fire_at, id;

-- name: doctor_same_day_fires
SELECT business_date, COUNT(*) AS n FROM occurrences
WHERE schedule_key = :schedule_key AND created_at >= :since AND outcome IN ('enqueued', 'backfilled')
GROUP BY business_date HAVING COUNT(*) > 1
ORDER BY business_date;

-- name: doctor_occurrences_on_date
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND business_date = CAST(:business_date AS date)
ORDER BY fire_at, id;

-- name: doctor_occurrences_between
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND fire_at >= :start AND fire_at <= :end
ORDER BY fire_at, id;

-- name: doctor_jobs_by_ids
SELECT * FROM jobs WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id;

-- name: doctor_jobs_of_occurrences
SELECT * FROM jobs WHERE occurrence_id = ANY(CAST(:ids AS bigint[])) ORDER BY id;

-- name: doctor_jobs_by_unique_keys
SELECT * FROM jobs WHERE unique_key = ANY(CAST(:keys AS text[])) ORDER BY id;

-- name: doctor_discarded_jobs
SELECT * FROM jobs WHERE state = 'discarded' AND finished_at >= :since ORDER BY finished_at, id;

-- name: doctor_expired_leases
SELECT * FROM jobs WHERE state = 'running' AND lease_expires_at < :now ORDER BY lease_expires_at, id;

-- name: doctor_overdue_jobs
SELECT * FROM jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND run_at < :before
ORDER BY run_at, id LIMIT :limit;

-- name: doctor_triggered_jobs
SELECT * FROM jobs
WHERE created_at >= :since AND source_kind IN ('manual', 'cli', 'api') AND task = ANY(CAST(:tasks AS text[]))
ORDER BY created_at, id;

-- name: doctor_effects_of_jobs
SELECT * FROM effects WHERE job_id = ANY(CAST(:ids AS bigint[])) ORDER BY started_at, key;

-- name: doctor_effects_by_keys
SELECT * FROM effects WHERE key = ANY(CAST(:keys AS text[])) ORDER BY started_at, key;
