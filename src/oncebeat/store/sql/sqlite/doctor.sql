-- Read-only queries of the doctor (SQLite), plus the audit-trail retention count.
-- Same names as postgres/doctor.sql. Lists arrive as JSON text and are read with json_each().
-- Aggregates carry "[TIMESTAMPTZ]"/"[DATE]" in their alias so that they come back as Python values.

-- name: doctor_db_now
-- SQLite has no server: this is the clock of the host that opened the file.
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS "db_now [TIMESTAMPTZ]";

-- name: doctor_processes
SELECT * FROM processes
WHERE stopped_at IS NULL OR stopped_at >= :since
ORDER BY started_at, id;

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

-- name: doctor_count_events_before
SELECT COUNT(*) AS n FROM events WHERE at < :before;

-- name: doctor_occurrences_by_ids
SELECT * FROM occurrences WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: doctor_triggered_occurrences
SELECT * FROM occurrences
WHERE created_at >= :since AND (outcome IN ('manual', 'backfilled') OR source_kind IN ('manual', 'cli', 'api'))
ORDER BY created_at, id;

-- name: doctor_occurrence_sources
SELECT source_host, source_pid, source_name, source_version, source_kind, schedule_key, COUNT(*) AS n,
       MIN(created_at) AS "first_at [TIMESTAMPTZ]", MAX(created_at) AS "last_at [TIMESTAMPTZ]"
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
SELECT business_date AS "business_date [DATE]", COUNT(*) AS n FROM occurrences
WHERE schedule_key = :schedule_key AND created_at >= :since AND outcome IN ('enqueued', 'backfilled')
GROUP BY business_date HAVING COUNT(*) > 1
ORDER BY business_date;

-- name: doctor_occurrences_on_date
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND business_date = :business_date
ORDER BY fire_at, id;

-- name: doctor_occurrences_between
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND fire_at >= :start AND fire_at <= :end
ORDER BY fire_at, id;

-- name: doctor_jobs_by_ids
SELECT * FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: doctor_jobs_of_occurrences
SELECT * FROM jobs WHERE occurrence_id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: doctor_jobs_by_unique_keys
SELECT * FROM jobs WHERE unique_key IN (SELECT value FROM json_each(:keys)) ORDER BY id;

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
WHERE created_at >= :since AND source_kind IN ('manual', 'cli', 'api')
  AND task IN (SELECT value FROM json_each(:tasks))
ORDER BY created_at, id;

-- name: doctor_effects_of_jobs
SELECT * FROM effects WHERE job_id IN (SELECT value FROM json_each(:ids)) ORDER BY started_at, key;

-- name: doctor_effects_by_keys
SELECT * FROM effects WHERE key IN (SELECT value FROM json_each(:keys)) ORDER BY started_at, key;
