-- Queries of oncebeat.clock, written once for both backends. sqlite/clock.sql and postgres/clock.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: update_schedule
UPDATE schedules
SET expression = :expression, tz = :tz, dst_gap = :dst_gap, dst_fold = :dst_fold, catchup = :catchup,
    catchup_window = :catchup_window, overlap = :overlap, task = :task, args = :args, queue = :queue,
    definition_hash = :definition_hash, version = version + 1, active_since = :active_since, updated_at = :now,
    origin = 'code', code_hash = NULL
WHERE key = :key AND (definition_hash <> :definition_hash OR origin <> 'code') AND state <> 'retired'
RETURNING version;

-- name: insert_schedule_set
INSERT INTO schedule_sets (hash, keys, first_seen_at, source_host, source_name, source_version)
VALUES (:hash, :keys, :now, :src_host, :src_name, :src_version)
ON CONFLICT DO NOTHING;

-- name: newest_schedule_set
SELECT * FROM schedule_sets ORDER BY first_seen_at DESC, hash DESC LIMIT 1;

-- name: get_schedule_set
SELECT * FROM schedule_sets WHERE hash = :hash;

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

-- name: clamp_active_since
-- Schedules made active "in the future" by a clock that ran fast and was stepped back since: they were active by
-- :now at the latest, so their instants after :now are due as any other (oncebeat.clock). Never below the newest
-- scheduled instant recorded, though: a definition change takes effect after it (active_since is set to it).
UPDATE schedules
SET active_since = COALESCE((SELECT CASE WHEN MAX(o.fire_at) > :now THEN MAX(o.fire_at) END FROM occurrences o
                             WHERE o.schedule_key = schedules.key AND o.outcome <> 'manual'), :now)
WHERE active_since > :now
  AND active_since > COALESCE((SELECT MAX(o.fire_at) FROM occurrences o
                               WHERE o.schedule_key = schedules.key AND o.outcome <> 'manual'), :now)
RETURNING key, active_since;

-- name: release_buffered_job
-- overlap = buffer_one: the run held under :held_key starts (holds :run_key, due now) once no unfinished job
-- holds :run_key, nor is any other unfinished run of :schedule_key left from before the policy was switched
-- (see unfinished_run_without_overlap_key); the partial unique index jobs_unique_key keeps it to one holder even
-- against a racing enqueue.
UPDATE jobs SET unique_key = :run_key, state = 'available', run_at = :now
WHERE unique_key = :held_key AND state = 'scheduled'
  AND NOT EXISTS (SELECT 1 FROM jobs AS running WHERE running.unique_key = :run_key
                  AND running.state IN ('available', 'scheduled', 'running', 'retryable'))
  AND NOT EXISTS (SELECT 1 FROM jobs AS j JOIN occurrences AS o ON o.id = j.run_of
                  WHERE o.schedule_key = :schedule_key AND j.state IN ('available', 'scheduled', 'running', 'retryable')
                    AND (j.unique_key IS NULL OR j.unique_key NOT IN (:run_key, :held_key)))
RETURNING id;

-- name: unfinished_run_without_overlap_key
-- An unfinished run of :schedule_key that holds no overlap key: enqueued while the schedule's overlap was `allow`
-- (or with a key of its own). After a switch to skip/buffer_one it is an unfinished run like any other. Runs only
-- (jobs.run_of, engine 0008): the jobs a run enqueues carry its occurrence id too, and are not runs.
SELECT j.id FROM jobs AS j JOIN occurrences AS o ON o.id = j.run_of
WHERE o.schedule_key = :schedule_key AND j.state IN ('available', 'scheduled', 'running', 'retryable')
  AND (j.unique_key IS NULL OR j.unique_key NOT IN (:run_key, :held_key))
LIMIT 1;

-- name: occurrence_at_with_job
-- What the ledger holds at one instant, with its job's state (backfill says what is already there).
SELECT o.id, o.outcome, o.reason, o.job_id, o.source_kind, o.source_host, o.source_pid, o.source_name,
       o.created_at, j.state AS job_state
FROM occurrences o LEFT JOIN jobs j ON j.id = o.job_id
WHERE o.schedule_key = :schedule_key AND o.fire_at = :fire_at;

-- name: set_occurrence_outcome
-- An occurrence whose run the overlap policy turned away (oncebeat.clock.fire_occurrence).
UPDATE occurrences SET outcome = :outcome, reason = :reason WHERE id = :id;
