-- Queries of oncebeat.queue, written once for both backends. sqlite/queue.sql and postgres/queue.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: insert_job
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
VALUES (:queue, :task, :args, :state, :priority, :max_attempts, :run_at, :unique_key, :occurrence_id,
        :src_kind, :src_host, :src_pid, :src_name, :src_version, :now)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: get_job
SELECT * FROM jobs WHERE id = :id;

-- name: list_jobs
SELECT * FROM jobs
WHERE (CAST(:state AS text) IS NULL OR state = :state) AND (CAST(:task AS text) IS NULL OR task = :task)
ORDER BY id DESC LIMIT :limit;

-- name: count_jobs_by_state
SELECT state, COUNT(*) AS n FROM jobs GROUP BY state ORDER BY state;

-- name: cancel_job
UPDATE jobs SET state = 'cancelled', finished_at = :now, lease_expires_at = NULL
WHERE id = :id AND state IN ('available', 'scheduled', 'retryable')
RETURNING id;

-- name: count_unfinished_jobs_by_queue
SELECT queue, state, COUNT(*) AS n FROM jobs
WHERE state IN ('available', 'scheduled', 'running', 'retryable')
GROUP BY queue, state ORDER BY queue, state;

-- name: count_unfinished_jobs_capped
-- The overview's counts: unfinished jobs per queue and state, each counted up to the cap parameter (the page
-- shows a count that reached it as "more than" one less), so the page reads a bounded number of index entries whatever the
-- backlog (an exact count walked all 1.29M entries of a first scan's send jobs: 464 ms). The queues come from
-- jobs_unfinished_queue one at a time (a skip scan: a probe per queue, not per job). PostgreSQL's own block counts
-- the running jobs apart (engine 0015).
WITH RECURSIVE q (queue) AS (
    SELECT MIN(queue) FROM jobs WHERE state IN ('available', 'scheduled', 'running', 'retryable')
    UNION ALL
    SELECT (SELECT MIN(j.queue) FROM jobs j
            WHERE j.state IN ('available', 'scheduled', 'running', 'retryable') AND j.queue > q.queue)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue, state, n FROM (
    SELECT q.queue AS queue, s.state AS state,
           (SELECT COUNT(*) FROM (SELECT 1 AS one FROM jobs j WHERE j.queue = q.queue AND j.state = s.state
                                  AND j.state IN ('available', 'scheduled', 'running', 'retryable')
                                  LIMIT :cap) AS c) AS n
    FROM q CROSS JOIN (SELECT 'available' AS state UNION ALL SELECT 'scheduled' UNION ALL SELECT 'running'
                       UNION ALL SELECT 'retryable') AS s
    WHERE q.queue IS NOT NULL
) AS counted
WHERE n > 0
ORDER BY queue, state;

-- name: count_finished_jobs_capped
-- The job list's counts of the final states, each counted up to the cap parameter (the page shows a count that
-- reached it as "more than" one less), so /jobs reads a bounded number of index entries beside millions of
-- finished jobs (count_jobs_by_state walked them all: 1.1-1.5 s at 3.3M jobs). A finished job always has
-- finished_at (every statement that finishes one sets it; retention prunes by it), which lets each arm walk the
-- partial index jobs_finished_at where no state index serves it (completed jobs, and every final state on SQLite);
-- in_doubt from jobs_in_doubt. The unfinished states come from count_unfinished_jobs_capped.
SELECT 'completed' AS state,
       (SELECT COUNT(*) FROM (SELECT 1 AS one FROM jobs WHERE state = 'completed' AND finished_at IS NOT NULL
                              LIMIT :cap) AS c) AS n
UNION ALL
SELECT 'discarded', (SELECT COUNT(*) FROM (SELECT 1 AS one FROM jobs WHERE state = 'discarded'
                                           AND finished_at IS NOT NULL LIMIT :cap) AS c)
UNION ALL
SELECT 'cancelled', (SELECT COUNT(*) FROM (SELECT 1 AS one FROM jobs WHERE state = 'cancelled'
                                           AND finished_at IS NOT NULL LIMIT :cap) AS c)
UNION ALL
SELECT 'in_doubt', (SELECT COUNT(*) FROM (SELECT 1 AS one FROM jobs WHERE state = 'in_doubt' LIMIT :cap) AS c);

-- name: enqueue_select
-- One job per row of another layer's named SELECT, put at the source slot by Tx.run_with: columns args (a JSON
-- object), unique_key (or NULL), occurrence_id (or NULL). A row whose unique key an unfinished job holds is skipped.
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT :queue, :task, s.args, 'available', :priority, :max_attempts, :now, s.unique_key, s.occurrence_id,
       :src_kind, :src_host, :src_pid, :src_name, :src_version, :now
FROM (/*source*/) AS s
WHERE true
ON CONFLICT DO NOTHING
RETURNING id, occurrence_id;

-- name: enqueue_runs_select
-- The runs of occurrences the clock just recorded (oncebeat.clock's set-based fire), one per row of another layer's
-- named SELECT put at the source slot: columns id (the job id the occurrence already names: the clock drew it from
-- the jobs' id sequence when it inserted the occurrence), args, unique_key, occurrence_id and run_of. The job and
-- its occurrence point at each other from their inserts: no update of either afterwards.
-- No ON CONFLICT: the ids were just drawn and each occurrence was just inserted in this transaction, so no other
-- row can hold a job's id or run_of; a conflict is a broken database and fails the statement (and the batch).
INSERT INTO jobs (id, queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id, run_of,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT s.id, :queue, :task, s.args, 'available', :priority, :max_attempts, :now, s.unique_key, s.occurrence_id,
       s.run_of, :src_kind, :src_host, :src_pid, :src_name, :src_version, :now
FROM (/*source*/) AS s
RETURNING id, run_of;

-- name: job_copy
-- A fresh job with the same task and arguments as a finished one (its done effects come back from the ledger);
-- a copy of a run serves the same occurrence (run_of), so it is not made while another run of it is unfinished.
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id, run_of,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT queue, task, args, 'available', priority, max_attempts, :now, unique_key, occurrence_id, run_of,
       :src_kind, :src_host, :src_pid, :src_name, :src_version, :now
FROM jobs WHERE id = :id
ON CONFLICT DO NOTHING
RETURNING id;

-- name: other_unfinished_run
-- The unfinished run (other than job :id) of the occurrence job :id serves, and that occurrence (run_of; for a run
-- engine migration 0008 left outside the rule, worked out from its occurrence's link as retry_job does). A job that
-- is no occurrence's run (one a task enqueued carrying the occurrence id) serves none: no row.
SELECT other.id, other.state, other.run_of
FROM jobs other
JOIN (SELECT id, COALESCE(run_of, CASE WHEN jobs.id = (SELECT l.job_id FROM occurrences l WHERE l.id = jobs.occurrence_id) THEN (
                  WITH RECURSIVE up(id, parent) AS (
                      SELECT id, rerun_of FROM occurrences WHERE id = jobs.occurrence_id
                      UNION ALL SELECT o.id, o.rerun_of FROM occurrences o JOIN up ON o.id = up.parent)
                  SELECT MIN(COALESCE(parent, id)) FROM up) END) AS served FROM jobs WHERE id = :id) me
  ON other.run_of = me.served AND other.id <> me.id
WHERE other.state IN ('available', 'scheduled', 'running', 'retryable')
LIMIT 1;

-- name: unfinished_run_of
-- The unfinished run of occurrence :run_of (jobs_one_run_per_occurrence admits at most one).
SELECT id, state FROM jobs
WHERE run_of = :run_of AND state IN ('available', 'scheduled', 'running', 'retryable')
ORDER BY id LIMIT 1;


-- name: finished_jobs_by_queue
-- Jobs finished since :since per queue and final state (reads jobs_finished_at).
SELECT queue, state, COUNT(*) AS n FROM jobs WHERE finished_at >= :since
GROUP BY queue, state ORDER BY queue, state;

-- name: running_jobs
-- What each worker runs now: jobs under a lease, oldest start first, with the process holding it (its last
-- heartbeat; NULL when the process row is gone). Reads jobs_running_lease.
SELECT j.id, j.queue, j.task, j.attempt, j.max_attempts, j.started_at, j.lease_expires_at, j.worker_id,
       p.host, p.pid, p.name AS process_name, p.heartbeat_at, p.stopped_at
FROM jobs j LEFT JOIN processes p ON p.id = j.worker_id
WHERE j.state = 'running'
ORDER BY j.started_at, j.id LIMIT :limit;

-- name: running_in_queue
-- Jobs of :queue under a lease (an expired lease not yet rescued counts: its job may still be running), for a
-- limited queue's claim. Reads jobs_unfinished_queue on SQLite, jobs_running_lease on PostgreSQL (engine 0015: its
-- jobs_unfinished_queue holds no running job).
SELECT COUNT(*) AS n FROM jobs WHERE queue = :queue AND state = 'running';

-- name: queue_limit_names
-- The limited queues (engine migration 0012): a worker re-reads them every few seconds inside its claim.
SELECT queue FROM queue_limits;
