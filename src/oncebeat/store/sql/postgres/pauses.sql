-- PostgreSQL's versions of the oncebeat.pauses queries that differ from common/pauses.sql (each replaces the
-- block of the same name there).

-- name: queue_job_counts
-- Unfinished jobs per queue: running, and unclaimed (available, scheduled, retryable; held ones included).
-- Engine 0015: the unclaimed ones from jobs_unfinished_queue, which holds no running job on PostgreSQL; the running
-- ones from jobs_running_lease.
SELECT queue, SUM(running) AS running, SUM(unclaimed) AS unclaimed FROM (
    SELECT queue, 0 AS running, COUNT(*) AS unclaimed FROM jobs
    WHERE state IN ('available', 'scheduled', 'retryable') GROUP BY queue
    UNION ALL
    SELECT queue, COUNT(*), 0 FROM jobs WHERE state = 'running' GROUP BY queue) AS counted
GROUP BY queue ORDER BY queue;
