-- PostgreSQL's versions of the oncebeat.queue queries that differ from common/queue.sql (each replaces the
-- block of the same name there); a block not in common/queue.sql is written for each backend.

-- name: insert_jobs_bulk
-- :rows is one JSON array of [queue, task, args, priority, max_attempts, run_at or null, unique_key, occurrence_id]:
-- one statement and one parameter for the whole batch (the server parses it as fast as typed arrays, and the
-- client encodes it in one C call). A null run_at is :now; a run_at after :now makes the job scheduled.
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT q, t, a, CASE WHEN run_at > CAST(:now AS timestamptz) THEN 'scheduled' ELSE 'available' END, p, m, run_at,
       u, o, CAST(:src_kind AS text), CAST(:src_host AS text), CAST(:src_pid AS integer), CAST(:src_name AS text),
       CAST(:src_version AS text), CAST(:now AS timestamptz)
FROM (SELECT r ->> 0 AS q, r ->> 1 AS t, r -> 2 AS a, CAST(r ->> 3 AS integer) AS p, CAST(r ->> 4 AS integer) AS m,
             COALESCE(CAST(r ->> 5 AS timestamptz), CAST(:now AS timestamptz)) AS run_at, r ->> 6 AS u,
             CAST(r ->> 7 AS bigint) AS o
      FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r) AS x
ON CONFLICT DO NOTHING;

-- name: insert_jobs_bulk_unkeyed
-- insert_jobs_bulk for a batch in which no job has a unique key: nothing can conflict (ids come from the
-- table's sequence), so a plain INSERT, which spares the speculative insertion of ON CONFLICT (a
-- pre-check of the arbiter indexes and a confirm WAL record per row): 100 rows take ~10 % less server time.
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT q, t, a, CASE WHEN run_at > CAST(:now AS timestamptz) THEN 'scheduled' ELSE 'available' END, p, m, run_at,
       u, o, CAST(:src_kind AS text), CAST(:src_host AS text), CAST(:src_pid AS integer), CAST(:src_name AS text),
       CAST(:src_version AS text), CAST(:now AS timestamptz)
FROM (SELECT r ->> 0 AS q, r ->> 1 AS t, r -> 2 AS a, CAST(r ->> 3 AS integer) AS p, CAST(r ->> 4 AS integer) AS m,
             COALESCE(CAST(r ->> 5 AS timestamptz), CAST(:now AS timestamptz)) AS run_at, r ->> 6 AS u,
             CAST(r ->> 7 AS bigint) AS o
      FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r) AS x;

-- name: lock_queue_limit
-- The first statement of a limited queue's claim: its limit, the row locked until the claim commits, so the
-- claims of one limited queue take turns (each then counts the running jobs the one before it committed: under
-- READ COMMITTED a new statement sees them). Other queues are not slowed.
SELECT max_running FROM queue_limits WHERE queue = :queue FOR UPDATE;

-- name: claim_jobs
-- A limited queue (engine migration 0012) is claimed only with capped = 1, after lock_queue_limit and
-- running_in_queue sized the limit to its free slots; with capped = 0 it yields nothing (a one-time filter, as the
-- pause), so a worker that has not yet read a new limit cannot pass it.
-- Returns only what a claimed job carries (oncebeat.queue.Job): not its errors (JSON) nor the instants that
-- running it never reads, to send and decode per row.
-- One queue per statement: with the queue fixed, jobs_fetch yields rows already in (priority, run_at, id)
-- order, so a claim reads about :limit rows however long the backlog is and whatever the table
-- statistics say (no sort of the whole queue after an idle period).
-- A pause holds what it names (engine migration 0009, oncebeat.pauses): a paused queue is not read at all (the
-- uncorrelated NOT EXISTS is a one-time filter), and a run of a paused schedule's occurrence (run_of) is passed
-- over; only a run is looked up (two primary-key probes), so a queue of plain jobs pays nothing per row.
-- The rows picked are updated by their physical address (ctid, a Tid Scan), not looked up again in jobs_pkey:
-- the row lock taken by the pick keeps that address current until the update, which is in the same statement.
-- The pick is an ARRAY(...) sub-select, which PostgreSQL runs once (an InitPlan) before the update: as a
-- subquery in FROM it was a join input the planner may rescan (a nested loop with it on the inner side), and
-- each rescan runs LIMIT … FOR UPDATE SKIP LOCKED again, skips the rows the statement already updated and
-- claims more than :limit (seen: a limit of 10 claimed 25). Queue.claim orders the rows (a Tid Scan returns
-- them in physical order).
UPDATE jobs
SET state = 'running', attempt = attempt + 1, worker_id = :worker_id, lease_expires_at = :lease_expires_at,
    started_at = :now
WHERE jobs.ctid = ANY(ARRAY(
    SELECT ctid FROM jobs
    WHERE queue = :queue AND state IN ('available', 'scheduled', 'retryable') AND run_at <= :now
      AND NOT EXISTS (SELECT 1 FROM paused_queues p WHERE p.queue = :queue)
      AND (:capped = 1 OR NOT EXISTS (SELECT 1 FROM queue_limits l WHERE l.queue = :queue))
      AND (run_of IS NULL OR COALESCE((
          SELECT s.state FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
          WHERE o.id = jobs.run_of), '') <> 'paused')
    ORDER BY priority, run_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED))
RETURNING jobs.id, queue, task, args, priority, attempt, max_attempts, run_at, occurrence_id, unique_key,
          source_kind, source_host, source_pid, source_name, source_version;

-- name: extend_leases
-- Fencing: only a lease that has not expired is renewed (an expired one belongs to the rescue, whether or not it
-- has run yet); the rows returned are the jobs this worker still holds.
-- By primary key only, as complete_jobs (jobs_running_lease holds the dead entries of every job run lately).
UPDATE jobs SET lease_expires_at = :lease_expires_at
WHERE id = ANY(CAST(:ids AS bigint[])) AND worker_id = :worker_id AND state || '' = 'running'
  AND lease_expires_at >= :now
RETURNING id, attempt;

-- name: complete_jobs
-- By primary key only: written `state = 'running'`, the condition lets the planner read the partial index
-- jobs_running_lease, which keeps an entry for every job run since the last VACUUM (a bitmap scan sets no
-- dead-entry hints): the completion then costs more the more jobs were drained. `state || ''` is the same test
-- that no index answers.
UPDATE jobs SET state = 'completed', finished_at = :now, lease_expires_at = NULL
WHERE id = ANY(CAST(:ids AS bigint[])) AND worker_id = :worker_id AND state || '' = 'running';

-- name: fail_job
UPDATE jobs
SET state = :state, run_at = :run_at, finished_at = :finished_at, lease_expires_at = NULL,
    errors = errors || jsonb_build_array(CAST(:error AS jsonb))
WHERE id = :id AND worker_id = :worker_id AND state = 'running' AND attempt = :attempt
RETURNING id, state, attempt, max_attempts;

-- name: snooze_job
-- Back to retryable without using up an attempt: the budget grows by the attempt just spent.
UPDATE jobs
SET state = 'retryable', run_at = :run_at, lease_expires_at = NULL, max_attempts = max_attempts + 1,
    errors = errors || jsonb_build_array(CAST(:error AS jsonb))
WHERE id = :id AND worker_id = :worker_id AND state = 'running' AND attempt = :attempt
RETURNING id;

-- name: return_jobs
UPDATE jobs SET state = 'available', attempt = attempt - 1, worker_id = NULL, lease_expires_at = NULL,
    started_at = NULL
WHERE worker_id = :worker_id AND state = 'running' AND id = ANY(CAST(:ids AS bigint[]))
RETURNING id;

-- name: rescue_jobs
UPDATE jobs
SET state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= max_attempts THEN :now ELSE NULL END,
    run_at = :now, lease_expires_at = NULL,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', CAST(:now AS timestamptz),
        'error', 'lease expired: worker ' || COALESCE(worker_id::text, '?') || ' stopped heartbeating', 'kind', 'rescue'))
WHERE id IN (SELECT id FROM jobs
             WHERE state = 'running' AND lease_expires_at < :now LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING id, state, attempt, worker_id, task;

-- name: next_run_at
-- Claimable jobs only: a job a pause holds (engine migration 0009) is not due whatever its run_at.
SELECT MIN(run_at) AS run_at FROM jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue IN (SELECT unnest(CAST(:queues AS text[])))
  AND queue NOT IN (SELECT p.queue FROM paused_queues p)
  AND (run_of IS NULL OR COALESCE((
      SELECT s.state FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
      WHERE o.id = jobs.run_of), '') <> 'paused');

-- name: jobs_left_behind
-- What a burst worker could not take in :queues: jobs running under another worker's lease ("leased": until the
-- last lease ends) and unclaimed jobs due after :now ("later": from the first run_at), a run held by overlap
-- buffer_one (run_at :held_until) and jobs a pause holds (jobs_held counts those) left out. One row per
-- kind present.
SELECT CASE WHEN state = 'running' THEN 'leased' ELSE 'later' END AS kind, COUNT(*) AS n,
       MIN(CASE WHEN state = 'running' THEN lease_expires_at ELSE run_at END) AS first_at,
       MAX(CASE WHEN state = 'running' THEN lease_expires_at ELSE run_at END) AS last_at
FROM jobs
WHERE queue IN (SELECT unnest(CAST(:queues AS text[])))
  AND ((state = 'running' AND (worker_id IS NULL OR worker_id <> :worker_id))
       OR (state IN ('available', 'scheduled', 'retryable') AND run_at > :now AND run_at < :held_until
           AND queue NOT IN (SELECT p.queue FROM paused_queues p)
           AND (run_of IS NULL OR COALESCE((
               SELECT s.state FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
               WHERE o.id = jobs.run_of), '') <> 'paused')))
GROUP BY CASE WHEN state = 'running' THEN 'leased' ELSE 'later' END;

-- name: finished_jobs_histogram
-- Jobs finished since :since per :bucket-second slot and final state (slot 0 starts at :since).
SELECT CAST(floor(extract(epoch FROM finished_at - CAST(:since AS timestamptz)) / :bucket) AS integer) AS slot,
       state, COUNT(*) AS n
FROM jobs WHERE finished_at >= :since
GROUP BY slot, state ORDER BY slot, state;

-- name: list_jobs_page
-- Newest first, keyset on id; each filter may be NULL. Reads jobs_state_id_resting (a waiting or failed state,
-- engine 0013), jobs_running_lease (running) or the primary key backwards (completed, task, queue, instants).
-- held: what holds a waiting job ('queue Q paused', 'schedule K paused'), else NULL.
SELECT id, queue, task, args, state, priority, attempt, max_attempts, run_at, lease_expires_at, worker_id,
       unique_key, occurrence_id, source_kind, source_host, source_pid, source_name, source_version,
       created_at, started_at, finished_at, jsonb_array_length(errors) AS error_count,
       errors -> -1 ->> 'error' AS last_error,
       CASE WHEN state IN ('available', 'scheduled', 'retryable') THEN COALESCE(
           (SELECT 'queue ' || p.queue || ' paused' FROM paused_queues p WHERE p.queue = jobs.queue),
           (SELECT 'schedule ' || s.key || ' paused' FROM occurrences o JOIN schedules s ON s.key = o.schedule_key
            WHERE o.id = jobs.run_of AND s.state = 'paused')) END AS held
FROM jobs
WHERE (CAST(:state AS text) IS NULL OR state = :state)
  AND (CAST(:task AS text) IS NULL OR task = :task)
  AND (CAST(:queue AS text) IS NULL OR queue = :queue)
  AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until)
  AND (CAST(:before_id AS bigint) IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit;

-- name: retry_job
-- An operator's retry: a discarded, cancelled or waiting job runs again now, with one more attempt allowed.
-- A run held by overlap buffer_one ('overlap-held:<key>') takes its schedule's run key: the unique index then
-- refuses the retry while the previous run is unfinished (oncebeat.clock.enqueue_run). A run of an occurrence keeps
-- run_of (one engine migration 0008 left outside the rule, already running, takes it again from its occurrence's
-- link): jobs_one_run_per_occurrence refuses the retry while another run of that occurrence is unfinished.
UPDATE jobs SET state = 'available', run_at = :now, finished_at = NULL, lease_expires_at = NULL, worker_id = NULL,
    unique_key = CASE WHEN unique_key LIKE 'overlap-held:%' THEN 'overlap:' || substr(unique_key, 14)
                      ELSE unique_key END,
    run_of = COALESCE(run_of, CASE WHEN jobs.id = (SELECT l.job_id FROM occurrences l WHERE l.id = jobs.occurrence_id) THEN (
                  WITH RECURSIVE up(id, parent) AS (
                      SELECT id, rerun_of FROM occurrences WHERE id = jobs.occurrence_id
                      UNION ALL SELECT o.id, o.rerun_of FROM occurrences o JOIN up ON o.id = up.parent)
                  SELECT MIN(COALESCE(parent, id)) FROM up) END),
    max_attempts = GREATEST(max_attempts, attempt + 1)
WHERE id = :id AND state IN ('discarded', 'cancelled', 'retryable', 'scheduled')
RETURNING id, state;

-- name: enqueue_select
-- One job per row of another layer's named SELECT, put at the source slot by Tx.run_with: columns args (a JSON
-- object), unique_key (or NULL), occurrence_id (or NULL). A row whose unique key an unfinished job holds is skipped.
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT CAST(:queue AS text), CAST(:task AS text), CAST(s.args AS jsonb), 'available', CAST(:priority AS integer),
       CAST(:max_attempts AS integer), CAST(:now AS timestamptz), s.unique_key, s.occurrence_id,
       CAST(:src_kind AS text), CAST(:src_host AS text), CAST(:src_pid AS integer), CAST(:src_name AS text),
       CAST(:src_version AS text), CAST(:now AS timestamptz)
FROM (/*source*/) AS s
ON CONFLICT DO NOTHING
RETURNING id, occurrence_id;

-- name: enqueue_runs_select
-- See common/queue.sql (no ON CONFLICT: a plain insert, ~20 % less server time per row than a speculative one).
INSERT INTO jobs (id, queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id, run_of,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT CAST(s.id AS bigint), CAST(:queue AS text), CAST(:task AS text), CAST(s.args AS jsonb), 'available',
       CAST(:priority AS integer), CAST(:max_attempts AS integer), CAST(:now AS timestamptz), s.unique_key,
       s.occurrence_id, s.run_of, CAST(:src_kind AS text), CAST(:src_host AS text), CAST(:src_pid AS integer),
       CAST(:src_name AS text), CAST(:src_version AS text), CAST(:now AS timestamptz)
FROM (/*source*/) AS s
RETURNING id, run_of;

-- name: jobs_in_doubt
SELECT * FROM jobs WHERE state = 'in_doubt' ORDER BY id;

-- name: job_rerun
-- An operator judged an in-doubt effect not done: the job runs again (one more attempt allowed), unless another
-- unfinished job holds its unique key or runs its occurrence (that one will run the effect).
UPDATE jobs
SET state = 'available', run_at = :now, finished_at = NULL, lease_expires_at = NULL, worker_id = NULL,
    max_attempts = GREATEST(max_attempts, attempt + 1), errors = errors || jsonb_build_array(CAST(:entry AS jsonb)),
    run_of = COALESCE(run_of, CASE WHEN jobs.id = (SELECT l.job_id FROM occurrences l WHERE l.id = jobs.occurrence_id) THEN (
                  WITH RECURSIVE up(id, parent) AS (
                      SELECT id, rerun_of FROM occurrences WHERE id = jobs.occurrence_id
                      UNION ALL SELECT o.id, o.rerun_of FROM occurrences o JOIN up ON o.id = up.parent)
                  SELECT MIN(COALESCE(parent, id)) FROM up) END)
WHERE id = :id AND state = :from_state
  AND (unique_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM jobs other WHERE other.unique_key = jobs.unique_key AND other.id <> jobs.id
        AND other.state IN ('available', 'scheduled', 'running', 'retryable')))
  AND (run_of IS NULL OR NOT EXISTS (
      SELECT 1 FROM jobs other WHERE other.run_of = jobs.run_of AND other.id <> jobs.id
        AND other.state IN ('available', 'scheduled', 'running', 'retryable')))
RETURNING id;

-- name: job_close_in_doubt
-- Every in-doubt effect of the job was resolved: it ends completed (the resolution appended to its errors).
UPDATE jobs SET state = 'completed', finished_at = :now, errors = errors || jsonb_build_array(CAST(:entry AS jsonb))
WHERE id = :id AND state = 'in_doubt'
RETURNING id;

-- name: count_unfinished_jobs_by_queue
-- Engine 0015: jobs_unfinished_queue holds the unclaimed states only; the running jobs are counted apart, from
-- jobs_running_lease (every claim writes an entry there; they are few: one per worker slot).
SELECT queue, state, COUNT(*) AS n FROM jobs
WHERE state IN ('available', 'scheduled', 'retryable')
GROUP BY queue, state
UNION ALL
SELECT queue, 'running', COUNT(*) FROM jobs WHERE state = 'running' GROUP BY queue
ORDER BY queue, state;

-- name: count_unfinished_jobs_capped
-- See common/queue.sql. Engine 0015: the unclaimed states come from jobs_unfinished_queue (the skip scan over its
-- queues, each state counted up to the cap), the running jobs from jobs_running_lease, per queue (they are few: one
-- per worker slot; LEAST keeps the cap's meaning).
WITH RECURSIVE q (queue) AS (
    SELECT MIN(queue) FROM jobs WHERE state IN ('available', 'scheduled', 'retryable')
    UNION ALL
    SELECT (SELECT MIN(j.queue) FROM jobs j
            WHERE j.state IN ('available', 'scheduled', 'retryable') AND j.queue > q.queue)
    FROM q WHERE q.queue IS NOT NULL
)
SELECT queue, state, n FROM (
    SELECT q.queue AS queue, s.state AS state,
           (SELECT COUNT(*) FROM (SELECT 1 AS one FROM jobs j WHERE j.queue = q.queue AND j.state = s.state
                                  AND j.state IN ('available', 'scheduled', 'retryable')
                                  LIMIT :cap) AS c) AS n
    FROM q CROSS JOIN (VALUES ('available'), ('scheduled'), ('retryable')) AS s (state)
    WHERE q.queue IS NOT NULL
    UNION ALL
    SELECT queue, 'running', LEAST(COUNT(*), CAST(:cap AS bigint)) FROM jobs WHERE state = 'running'
    GROUP BY queue
) AS counted
WHERE n > 0
ORDER BY queue, state;

-- name: queue_depths
-- Unclaimed jobs per queue (reads jobs_unfinished_queue or jobs_fetch, which both hold the unclaimed states only):
-- due now (run_at <= :now; a pause may hold some, the caller counts those apart), later (run_at > :now, a run held by overlap buffer_one included) and the oldest due
-- run_at (the queue's latency is :now minus it).
SELECT queue, SUM(CASE WHEN run_at <= :now THEN 1 ELSE 0 END) AS due,
       SUM(CASE WHEN run_at > :now THEN 1 ELSE 0 END) AS later,
       MIN(CASE WHEN run_at <= :now THEN run_at END) AS oldest_due_at
FROM jobs WHERE state IN ('available', 'scheduled', 'retryable')
GROUP BY queue ORDER BY queue;

-- name: task_stats
-- Per task, the jobs finished since :since: how many per final state, attempts beyond the first (retries), and
-- the run time of the completed ones (started_at of the last attempt to finished_at, seconds) at the 50th, 95th
-- and 99th percentile by the nearest-rank method (the smallest duration with at least p of them at or below it:
-- exact, no interpolation). Reads jobs_finished_at.
WITH done AS (
    SELECT task, state, attempt,
           CASE WHEN state = 'completed' AND started_at IS NOT NULL
                THEN extract(epoch FROM finished_at - started_at) END AS seconds
    FROM jobs WHERE finished_at >= :since),
ranked AS (
    SELECT task, seconds, ROW_NUMBER() OVER (PARTITION BY task ORDER BY seconds) AS rn,
           COUNT(*) OVER (PARTITION BY task) AS n
    FROM done WHERE seconds IS NOT NULL),
pct AS (
    SELECT task, MIN(CASE WHEN rn >= 0.50 * n THEN seconds END) AS p50,
           MIN(CASE WHEN rn >= 0.95 * n THEN seconds END) AS p95,
           MIN(CASE WHEN rn >= 0.99 * n THEN seconds END) AS p99, MAX(seconds) AS max_seconds
    FROM ranked GROUP BY task)
SELECT d.task, SUM(CASE WHEN d.state = 'completed' THEN 1 ELSE 0 END) AS completed,
       SUM(CASE WHEN d.state = 'discarded' THEN 1 ELSE 0 END) AS discarded,
       SUM(CASE WHEN d.state = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
       SUM(CASE WHEN d.state = 'in_doubt' THEN 1 ELSE 0 END) AS in_doubt,
       SUM(CASE WHEN d.attempt > 1 THEN d.attempt - 1 ELSE 0 END) AS retries,
       MIN(p.p50) AS p50, MIN(p.p95) AS p95, MIN(p.p99) AS p99, MIN(p.max_seconds) AS max_seconds
FROM done d LEFT JOIN pct p ON p.task = d.task
GROUP BY d.task ORDER BY d.task;

-- name: task_histogram
-- Jobs finished since :since per task, :bucket-second slot (slot 0 starts at :since) and final state.
SELECT task, CAST(floor(extract(epoch FROM finished_at - CAST(:since AS timestamptz)) / :bucket) AS integer) AS slot,
       state, COUNT(*) AS n
FROM jobs WHERE finished_at >= :since
GROUP BY task, slot, state ORDER BY task, slot, state;
