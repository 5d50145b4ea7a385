-- Engine queries for SQLite. One named block per query ("-- name: x"); the
-- PostgreSQL file defines exactly the same names. Parameters are :name.
-- Lists arrive as JSON text and are read with json_each().

-- name: register_process
INSERT INTO processes (role, host, pid, name, version, tz_env, info, started_at, heartbeat_at)
VALUES (:role, :host, :pid, :name, :version, :tz_env, :info, :now, :now)
RETURNING id;

-- name: heartbeat_process
UPDATE processes SET heartbeat_at = :now WHERE id = :id;

-- name: stop_process
UPDATE processes SET stopped_at = :now, heartbeat_at = :now WHERE id = :id;

-- name: list_processes
SELECT * FROM processes ORDER BY id;

-- name: database_now
-- The database's own clock. SQLite has no server: this is the host clock of the calling process,
-- which is why the clock refuses time_source = database on SQLite (see oncebeat.dbtime).
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS "now [TIMESTAMPTZ]";

-- name: list_schedules
SELECT * FROM schedules ORDER BY key;

-- name: get_schedule
SELECT * FROM schedules WHERE key = :key;

-- name: insert_schedule
INSERT INTO schedules (key, expression, tz, dst_gap, dst_fold, catchup, catchup_window, overlap, task, args,
                       queue, definition_hash, version, state, active_since, created_at, updated_at)
VALUES (:key, :expression, :tz, :dst_gap, :dst_fold, :catchup, :catchup_window, :overlap, :task, :args, :queue,
        :definition_hash, 1, 'active', :now, :now, :now)
ON CONFLICT DO NOTHING
RETURNING key;

-- name: update_schedule
UPDATE schedules
SET expression = :expression, tz = :tz, dst_gap = :dst_gap, dst_fold = :dst_fold, catchup = :catchup,
    catchup_window = :catchup_window, overlap = :overlap, task = :task, args = :args, queue = :queue,
    definition_hash = :definition_hash, version = version + 1, active_since = :active_since, updated_at = :now,
    origin = 'code', code_hash = NULL
WHERE key = :key AND (definition_hash <> :definition_hash OR origin <> 'code') AND state <> 'retired'
RETURNING version;

-- name: override_schedule
-- A run-time edit (schedule_admin.set_schedule): a new version that overrides the code definition :code_hash.
UPDATE schedules
SET expression = :expression, tz = :tz, dst_gap = :dst_gap, dst_fold = :dst_fold, catchup = :catchup,
    catchup_window = :catchup_window, overlap = :overlap, definition_hash = :definition_hash, version = version + 1,
    active_since = :active_since, updated_at = :now, origin = 'runtime', code_hash = :code_hash
WHERE key = :key AND state <> 'retired'
RETURNING version;

-- name: set_schedule_state
UPDATE schedules SET state = :state, updated_at = :now,
    active_since = CASE WHEN :state = 'active' THEN :now ELSE active_since END
WHERE key = :key AND state <> :state
RETURNING key;

-- name: insert_schedule_set
INSERT INTO schedule_sets (hash, keys, first_seen_at, source_host, source_name, source_version)
VALUES (:hash, :keys, :now, :src_host, :src_name, :src_version)
ON CONFLICT DO NOTHING;

-- name: newest_schedule_set
SELECT * FROM schedule_sets ORDER BY first_seen_at DESC, hash DESC LIMIT 1;

-- name: get_schedule_set
SELECT * FROM schedule_sets WHERE hash = :hash;

-- name: last_fires
SELECT schedule_key, MAX(fire_at) AS "last_fire_at [TIMESTAMPTZ]" FROM occurrences
WHERE outcome <> 'manual' GROUP BY schedule_key;

-- name: last_fire_at
SELECT MAX(fire_at) AS "last_fire_at [TIMESTAMPTZ]" FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual';

-- name: last_fire_at_or_before
-- The clock's cursor: the newest scheduled instant recorded at or before :now. Instants recorded
-- after :now (while a wall clock ran fast) do not hide the ones still missing before them.
SELECT MAX(fire_at) AS "last_fire_at [TIMESTAMPTZ]" FROM occurrences
WHERE schedule_key = :key AND outcome <> 'manual' AND fire_at <= :now;

-- name: period_served
-- A scheduled run of :key whose business date lies in [:first, :last] (the fire_at bounds only
-- let the unique (schedule_key, fire_at) index narrow the scan: no zone is more than 14 h off UTC).
SELECT id, fire_at, local_fire_at, tz, business_date, outcome FROM occurrences
WHERE schedule_key = :key AND outcome IN ('enqueued', 'backfilled')
  AND fire_at >= :from_at AND fire_at < :to_at
  AND business_date >= :first AND business_date <= :last
ORDER BY fire_at LIMIT 1;

-- name: insert_occurrence
INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, tzdata_version, outcome, reason,
                         source_kind, source_host, source_pid, source_name, source_version, created_at)
VALUES (:schedule_key, :fire_at, :local_fire_at, :tz, :business_date, :tzdata_version, :outcome, :reason,
        :src_kind, :src_host, :src_pid, :src_name, :src_version, :now)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: insert_rerun_occurrence
INSERT INTO occurrences (schedule_key, fire_at, local_fire_at, tz, business_date, tzdata_version, outcome, reason,
                         rerun_of, source_kind, source_host, source_pid, source_name, source_version, created_at)
VALUES (:schedule_key, :fire_at, :local_fire_at, :tz, :business_date, :tzdata_version, 'manual', :reason,
        :rerun_of, :src_kind, :src_host, :src_pid, :src_name, :src_version, :now)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: release_buffered_job
-- overlap = buffer_one: the run held under :held_key starts (holds :run_key, due now) once no unfinished job
-- holds :run_key; the partial unique index jobs_unique_key keeps it to one holder even against a racing enqueue.
UPDATE jobs SET unique_key = :run_key, state = 'available', run_at = :now
WHERE unique_key = :held_key AND state = 'scheduled'
  AND NOT EXISTS (SELECT 1 FROM jobs AS running WHERE running.unique_key = :run_key
                  AND running.state IN ('available', 'scheduled', 'running', 'retryable'))
RETURNING id;

-- name: overlap_holder
-- The unfinished run of a schedule holding the overlap key :key (what an occurrence turned away waits for).
SELECT id, state FROM jobs WHERE unique_key = :key AND state IN ('available', 'scheduled', 'running', 'retryable');

-- name: unfinished_job_of_occurrence
SELECT id, state FROM jobs
WHERE occurrence_id = :occurrence_id AND state IN ('available', 'scheduled', 'running', 'retryable')
ORDER BY id LIMIT 1;

-- name: occurrence_at_with_job
-- What the ledger holds at one instant, with its job's state (backfill says what is already there).
SELECT o.id, o.outcome, o.reason, o.job_id, o.source_kind, o.source_host, o.source_pid, o.source_name,
       o.created_at, j.state AS job_state
FROM occurrences o LEFT JOIN jobs j ON j.id = o.job_id
WHERE o.schedule_key = :schedule_key AND o.fire_at = :fire_at;

-- name: get_occurrence_by_instant
SELECT * FROM occurrences WHERE schedule_key = :schedule_key AND fire_at = :fire_at;

-- name: set_occurrence_job
UPDATE occurrences SET job_id = :job_id WHERE id = :id;

-- name: set_occurrence_outcome
-- An occurrence whose run the overlap policy turned away (oncebeat.clock.fire_occurrence).
UPDATE occurrences SET outcome = :outcome, reason = :reason WHERE id = :id;

-- name: get_occurrence
SELECT * FROM occurrences WHERE id = :id;

-- name: list_occurrences
SELECT * FROM occurrences WHERE (:schedule_key IS NULL OR schedule_key = :schedule_key) ORDER BY fire_at, id;

-- name: insert_job
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
VALUES (:queue, :task, :args, :state, :priority, :max_attempts, :run_at, :unique_key, :occurrence_id,
        :src_kind, :src_host, :src_pid, :src_name, :src_version, :now)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: insert_jobs_bulk
-- :rows is one JSON array of [queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id]
-- (run_at as fixed-width UTC text): one statement and one parameter for the whole batch.
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'),
       json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'),
       :src_kind, :src_host, :src_pid, :src_name, :src_version, :now
FROM json_each(:rows)
WHERE true
ON CONFLICT DO NOTHING;

-- name: get_job
SELECT * FROM jobs WHERE id = :id;

-- name: list_jobs
SELECT * FROM jobs
WHERE (:state IS NULL OR state = :state) AND (:task IS NULL OR task = :task)
ORDER BY id DESC LIMIT :limit;

-- name: count_jobs_by_state
SELECT state, COUNT(*) AS n FROM jobs GROUP BY state ORDER BY state;

-- name: claim_jobs
-- One queue per statement: with the queue fixed, jobs_fetch yields rows already in (priority, run_at, id)
-- order, so a claim reads about :limit rows however long the backlog is (no sort of the whole queue).
UPDATE jobs
SET state = 'running', attempt = attempt + 1, worker_id = :worker_id, lease_expires_at = :lease_expires_at,
    started_at = :now
WHERE id IN (
    SELECT id FROM jobs INDEXED BY jobs_fetch
    WHERE queue = :queue AND state IN ('available', 'scheduled', 'retryable') AND run_at <= :now
    ORDER BY priority, run_at, id
    LIMIT :limit)
RETURNING *;

-- name: extend_leases
-- Fencing: only a lease that has not expired is renewed (an expired one belongs to the rescue, whether or not it
-- has run yet); the rows returned are the jobs this worker still holds.
UPDATE jobs SET lease_expires_at = :lease_expires_at
WHERE worker_id = :worker_id AND state = 'running' AND id IN (SELECT value FROM json_each(:ids))
  AND lease_expires_at >= :now
RETURNING id, attempt;

-- name: complete_jobs
UPDATE jobs SET state = 'completed', finished_at = :now, lease_expires_at = NULL
WHERE worker_id = :worker_id AND state = 'running' AND id IN (SELECT value FROM json_each(:ids));

-- name: fail_job
UPDATE jobs
SET state = :state, run_at = :run_at, finished_at = :finished_at, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json(:error))
WHERE id = :id AND worker_id = :worker_id AND state = 'running' AND attempt = :attempt
RETURNING id, state, attempt, max_attempts;

-- name: snooze_job
-- Back to retryable without using up an attempt: the budget grows by the attempt just spent.
UPDATE jobs
SET state = 'retryable', run_at = :run_at, lease_expires_at = NULL, max_attempts = max_attempts + 1,
    errors = json_insert(errors, '$[#]', json(:error))
WHERE id = :id AND worker_id = :worker_id AND state = 'running' AND attempt = :attempt
RETURNING id;

-- name: return_jobs
UPDATE jobs SET state = 'available', attempt = attempt - 1, worker_id = NULL, lease_expires_at = NULL,
    started_at = NULL
WHERE worker_id = :worker_id AND state = 'running' AND id IN (SELECT value FROM json_each(:ids))
RETURNING id;

-- name: rescue_jobs
UPDATE jobs
SET state = CASE WHEN attempt >= max_attempts THEN 'discarded' ELSE 'available' END,
    finished_at = CASE WHEN attempt >= max_attempts THEN :now ELSE NULL END,
    run_at = :now, lease_expires_at = NULL,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', :now,
        'error', 'lease expired: worker ' || COALESCE(worker_id, '?') || ' stopped heartbeating', 'kind', 'rescue'))
WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_running_lease
             WHERE state = 'running' AND lease_expires_at < :now LIMIT :limit)
RETURNING id, state, attempt, worker_id, task;

-- name: cancel_job
UPDATE jobs SET state = 'cancelled', finished_at = :now, lease_expires_at = NULL
WHERE id = :id AND state IN ('available', 'scheduled', 'retryable')
RETURNING id;

-- name: next_run_at
SELECT MIN(run_at) AS "run_at [TIMESTAMPTZ]" FROM jobs
WHERE state IN ('available', 'scheduled', 'retryable') AND queue IN (SELECT value FROM json_each(:queues));

-- name: job_holder_alive
SELECT 1 AS alive FROM jobs
WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
  AND lease_expires_at >= :now;

-- name: effect_holder_current
-- Fencing: a job attempt claims an effect only while it is the job's current holder with an unexpired lease
-- (the predicate job_holder_alive gives everyone else). Read in the claim's transaction, which keeps
-- the rescue off the job until the claim commits (BEGIN IMMEDIATE already serialises writers).
SELECT 1 AS current FROM jobs
WHERE id = :job_id AND attempt = :attempt AND worker_id = :worker_id AND state = 'running'
  AND lease_expires_at >= :now;

-- name: effect_claim
INSERT INTO effects (key, state, payload_hash, job_id, attempt, process_id, source_kind, source_host, source_pid,
                     source_name, source_version, started_at, no_return_at, frozen)
VALUES (:key, 'started', :payload_hash, :job_id, :attempt, :process_id, :src_kind, :src_host, :src_pid,
        :src_name, :src_version, :now, :no_return_at, :frozen)
ON CONFLICT DO NOTHING
RETURNING key;

-- name: effect_get
SELECT * FROM effects WHERE key = :key;

-- name: effect_finish
-- A done effect drops its frozen input: nothing will ever send it again.
UPDATE effects SET state = :state, result = :result, detail = :detail, finished_at = :now,
    frozen = CASE WHEN :state = 'done' THEN NULL ELSE frozen END
WHERE key = :key AND state = :from_state AND COALESCE(job_id, -1) = COALESCE(:job_id, -1)
  AND COALESCE(attempt, -1) = COALESCE(:attempt, -1)
RETURNING key;

-- name: effect_take_over
-- The input frozen at the first attempt is kept (a retry sends exactly that); a row without one gets :frozen.
UPDATE effects SET state = 'started', job_id = :job_id, attempt = :attempt, process_id = :process_id,
    started_at = :now, finished_at = NULL, detail = :detail, no_return_at = :no_return_at,
    frozen = COALESCE(frozen, :frozen)
WHERE key = :key AND state = :from_state
RETURNING key, frozen;

-- name: effect_mark_in_doubt
UPDATE effects SET state = 'in_doubt', detail = :detail, finished_at = :now
WHERE key = :key AND state = 'started'
RETURNING key;

-- name: effect_no_return
-- The holder passed its point of no return: from now on its death leaves the key in doubt.
UPDATE effects SET no_return_at = :now
WHERE key = :key AND state = 'started' AND COALESCE(job_id, -1) = COALESCE(:job_id, -1)
  AND COALESCE(attempt, -1) = COALESCE(:attempt, -1)
RETURNING key;

-- name: jobs_in_doubt
SELECT * FROM jobs INDEXED BY jobs_in_doubt WHERE state = 'in_doubt' ORDER BY id;

-- name: job_rerun
-- An operator judged an in-doubt effect not done: the job runs again (one more attempt allowed), unless another
-- unfinished job holds its unique key (that one will run the effect).
UPDATE jobs
SET state = 'available', run_at = :now, finished_at = NULL, lease_expires_at = NULL, worker_id = NULL,
    max_attempts = MAX(max_attempts, attempt + 1), errors = json_insert(errors, '$[#]', json(:entry))
WHERE id = :id AND state = :from_state
  AND (unique_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM jobs other WHERE other.unique_key = jobs.unique_key AND other.id <> jobs.id
        AND other.state IN ('available', 'scheduled', 'running', 'retryable')))
RETURNING id;

-- name: job_copy
-- A fresh job with the same task and arguments as a finished one (its done effects come back from the ledger).
INSERT INTO jobs (queue, task, args, state, priority, max_attempts, run_at, unique_key, occurrence_id,
                  source_kind, source_host, source_pid, source_name, source_version, created_at)
SELECT queue, task, args, 'available', priority, max_attempts, :now, unique_key, occurrence_id,
       :src_kind, :src_host, :src_pid, :src_name, :src_version, :now
FROM jobs WHERE id = :id
ON CONFLICT DO NOTHING
RETURNING id;

-- name: job_close_in_doubt
-- Every in-doubt effect of the job was resolved: it ends completed (the resolution appended to its errors).
UPDATE jobs SET state = 'completed', finished_at = :now, errors = json_insert(errors, '$[#]', json(:entry))
WHERE id = :id AND state = 'in_doubt'
RETURNING id;

-- name: list_effects
SELECT * FROM effects WHERE (:state IS NULL OR state = :state) ORDER BY started_at, key;

-- name: insert_event
INSERT INTO events (at, kind, subject, process_id, source_kind, source_host, source_pid, source_name,
                    source_version, detail)
VALUES (:now, :kind, :subject, :process_id, :src_kind, :src_host, :src_pid, :src_name, :src_version, :detail);

-- name: list_events
SELECT * FROM events
WHERE (:subject IS NULL OR subject = :subject) AND (:kind IS NULL OR kind = :kind) AND at >= :since
ORDER BY id;

-- name: prune_events
DELETE FROM events WHERE at < :before;

-- name: list_running_processes
SELECT * FROM processes WHERE stopped_at IS NULL ORDER BY id;

-- name: processes_by_ids
SELECT * FROM processes WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: count_unfinished_jobs_by_queue
SELECT queue, state, COUNT(*) AS n FROM jobs
WHERE state IN ('available', 'scheduled', 'running', 'retryable')
GROUP BY queue, state ORDER BY queue, state;

-- name: count_unfinished_effects
SELECT state, COUNT(*) AS n FROM effects WHERE state <> 'done' GROUP BY state ORDER BY state;

-- name: finished_jobs_histogram
-- Jobs finished since :since per :bucket-second slot and final state (slot 0 starts at :since).
SELECT CAST((julianday(finished_at) - julianday(:since)) * 86400.0 / :bucket AS INTEGER) AS slot,
       state, COUNT(*) AS n
FROM jobs WHERE finished_at >= :since
GROUP BY slot, state ORDER BY slot, state;

-- name: occurrence_timeline
-- Newest first, keyset on fire_at; reads the (schedule_key, fire_at) unique index.
SELECT o.*, j.state AS job_state FROM occurrences o LEFT JOIN jobs j ON j.id = o.job_id
WHERE o.schedule_key = :schedule_key AND (:before IS NULL OR o.fire_at < :before)
ORDER BY o.fire_at DESC LIMIT :limit;

-- name: list_jobs_page
-- Newest first, keyset on id; each filter may be NULL. Reads jobs_state_id / jobs_task_id / the primary key.
SELECT id, queue, task, args, state, priority, attempt, max_attempts, run_at, lease_expires_at, worker_id,
       unique_key, occurrence_id, source_kind, source_host, source_pid, source_name, source_version,
       created_at, started_at, finished_at, json_array_length(errors) AS error_count,
       json_extract(errors, '$[#-1].error') AS last_error
FROM jobs
WHERE (:state IS NULL OR state = :state)
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:since IS NULL OR created_at >= :since)
  AND (:until IS NULL OR created_at < :until)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit;

-- name: retry_job
-- An operator's retry: a discarded, cancelled or waiting job runs again now, with one more attempt allowed.
-- A run held by overlap buffer_one ('overlap-held:<key>') takes its schedule's run key: the unique index then
-- refuses the retry while the previous run is unfinished (oncebeat.clock.enqueue_run).
UPDATE jobs SET state = 'available', run_at = :now, finished_at = NULL, lease_expires_at = NULL, worker_id = NULL,
    unique_key = CASE WHEN unique_key LIKE 'overlap-held:%' THEN 'overlap:' || substr(unique_key, 14)
                      ELSE unique_key END,
    max_attempts = MAX(max_attempts, attempt + 1)
WHERE id = :id AND state IN ('discarded', 'cancelled', 'retryable', 'scheduled')
RETURNING id, state;

-- name: list_effects_page
-- Oldest first (the longest-waiting decision on top), keyset on (started_at, key).
SELECT * FROM effects
WHERE (:state IS NULL OR state = :state)
  AND (:after_at IS NULL OR (started_at, key) > (:after_at, :after_key))
ORDER BY started_at, key LIMIT :limit;

-- name: effects_of_job
SELECT * FROM effects WHERE job_id = :job_id ORDER BY started_at, key;

-- name: events_of_subject
SELECT * FROM events WHERE subject = :subject ORDER BY id DESC LIMIT :limit;

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
RETURNING id;
