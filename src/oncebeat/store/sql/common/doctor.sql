-- Read-only queries of the doctor package (engine tables), written once for both backends. sqlite/doctor.sql
-- and postgres/doctor.sql hold only the blocks that differ (each replaces the block of the same name here).

-- name: doctor_processes
SELECT * FROM processes
WHERE stopped_at IS NULL OR stopped_at >= :since
ORDER BY started_at, id;

-- name: doctor_triggered_occurrences
SELECT * FROM occurrences
WHERE created_at >= :since AND (outcome IN ('manual', 'backfilled') OR source_kind IN ('manual', 'cli', 'api'))
ORDER BY created_at, id;

-- name: doctor_occurrences_without_job
-- A manual run the schedule's overlap policy turned away keeps outcome 'manual' without a job, by design
-- (its reason starts 'overlap:', oncebeat.clock.OVERLAP_RUNNING / OVERLAP_FULL): not a lost run.
SELECT * FROM occurrences
WHERE created_at >= :since AND outcome IN ('enqueued', 'manual', 'backfilled') AND job_id IS NULL
  AND (reason IS NULL OR reason NOT LIKE 'overlap:%')
ORDER BY fire_at, id;

-- name: doctor_occurrences_after
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND created_at > :after ORDER BY fire_at, id;

-- name: doctor_occurrences_on_date
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND business_date = :business_date
ORDER BY fire_at, id;

-- name: doctor_occurrences_between
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND fire_at >= :start AND fire_at <= :end
ORDER BY fire_at, id;

-- name: doctor_discarded_jobs
SELECT * FROM jobs WHERE state = 'discarded' AND finished_at >= :since ORDER BY finished_at, id;

-- name: doctor_expired_leases
SELECT * FROM jobs WHERE state = 'running' AND lease_expires_at < :now ORDER BY lease_expires_at, id;

-- name: doctor_overdue_jobs
-- A job a pause holds (engine migration 0009: a paused queue, a paused schedule's run) waits for a resume, not for
-- a worker: it is left out here (check_lost reports it as held).
SELECT * FROM jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND run_at < :before
  AND queue NOT IN (SELECT p.queue FROM paused_queues p)
  AND (run_of IS NULL OR COALESCE((
      SELECT s.state FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
      WHERE o.id = jobs.run_of), '') <> 'paused')
ORDER BY run_at, id LIMIT :limit;
