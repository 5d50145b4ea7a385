-- Queries of oncebeat.pauses, written once for both backends (no dialect differs). Parameters are :name.
-- The claim itself (queue.sql claim_jobs) reads paused_queues and schedules.state: these only record and count.

-- name: pause_queue
INSERT INTO paused_queues (queue, paused_at, source_kind, source_host, source_pid, source_name, source_version)
VALUES (:queue, :now, :src_kind, :src_host, :src_pid, :src_name, :src_version)
ON CONFLICT DO NOTHING
RETURNING queue;

-- name: resume_queue
DELETE FROM paused_queues WHERE queue = :queue
RETURNING queue;

-- name: list_paused_queues
SELECT * FROM paused_queues ORDER BY queue;

-- name: queue_job_counts
-- Unfinished jobs per queue: running, and unclaimed (available, scheduled, retryable; held ones included).
-- Reads jobs_unfinished_queue only (SQLite; PostgreSQL's block counts the running jobs apart, engine 0015).
SELECT queue, SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END) AS running,
       SUM(CASE WHEN state <> 'running' THEN 1 ELSE 0 END) AS unclaimed
FROM jobs WHERE state IN ('available', 'scheduled', 'running', 'retryable')
GROUP BY queue ORDER BY queue;

-- name: jobs_held
-- Unclaimed jobs a pause holds (engine migration 0009), per cause: kind 'queue' (name: the paused queue) or
-- 'schedule' (name: the paused schedule whose occurrence they run; a run in a paused queue counts under its queue).
-- One row per (kind, name, queue); :schedule_key (or NULL) keeps only that schedule's runs (its queue's pause
-- included). Reads the paused queues' unfinished jobs (jobs_unfinished_queue) and the paused schedules'
-- occurrences' runs (jobs_one_run_per_occurrence): nothing when nothing is paused.
SELECT kind, name, queue, n FROM (
    SELECT 'queue' AS kind, j.queue AS name, j.queue AS queue, COUNT(*) AS n
    FROM paused_queues p JOIN jobs j ON j.queue = p.queue
    WHERE j.state IN ('available', 'scheduled', 'retryable') AND CAST(:schedule_key AS text) IS NULL
    GROUP BY j.queue
    UNION ALL
    SELECT 'queue', j.queue, j.queue, COUNT(*)
    FROM paused_queues p JOIN jobs j ON j.queue = p.queue JOIN occurrences o ON o.id = j.run_of
    WHERE j.state IN ('available', 'scheduled', 'retryable') AND o.schedule_key = :schedule_key
    GROUP BY j.queue
    UNION ALL
    SELECT 'schedule', s.key, j.queue, COUNT(*)
    FROM schedules s JOIN occurrences o ON o.schedule_key = s.key JOIN jobs j ON j.run_of = o.id
    WHERE s.state = 'paused' AND j.state IN ('available', 'scheduled', 'retryable')
      AND (CAST(:schedule_key AS text) IS NULL OR s.key = :schedule_key)
      AND NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = j.queue)
    GROUP BY s.key, j.queue) AS held
ORDER BY kind, name, queue;
