-- Retention (oncebeat.retention): what `oncebeat prune` may delete, one id window at a time.
-- Each *_window block names the upper bound of the next window of at most :batch rows after :after in primary-key
-- order, so a pass over a table of any size reads each row once and holds no lock for long. Each prunable block
-- lists the rows of one window that may go; the prune_* blocks delete them, re-checking the state a concurrent
-- operator action could have changed (a discarded job retried, an effect resolved) so such a row is never lost.

-- name: retention_jobs_window
SELECT max(id) AS hi, count(*) AS n FROM (SELECT id FROM jobs WHERE id > :after ORDER BY id LIMIT :batch) AS w;

-- name: retention_prunable_jobs
-- Finished jobs only; a job one of whose effects is still being sent or is in doubt stays (its evidence), and so
-- does the run of an occurrence the ledger keeps, so every occurrence left still has its job. "Kept" is the
-- negation of retention_prunable_occurrences (:occ_before its cutoff), so a dry run counts what --apply deletes.
SELECT j.id FROM jobs j
WHERE j.id > :after AND j.id <= :hi
  AND j.state IN ('completed', 'discarded', 'cancelled') AND j.finished_at < :before
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.job_id = j.id AND e.state IN ('started', 'in_doubt'))
  AND NOT EXISTS (
      SELECT 1 FROM occurrences o WHERE o.id = j.occurrence_id
        AND (o.fire_at >= :occ_before OR o.created_at >= :occ_before
             OR NOT EXISTS (SELECT 1 FROM occurrences n
                            WHERE n.schedule_key = o.schedule_key AND n.fire_at > o.fire_at)
             OR EXISTS (SELECT 1 FROM jobs u WHERE (u.run_of = o.id OR u.occurrence_id = o.id)
                        AND u.state IN ('available', 'scheduled', 'running', 'retryable'))));

-- name: retention_occurrences_window
SELECT max(id) AS hi, count(*) AS n FROM (SELECT id FROM occurrences WHERE id > :after ORDER BY id LIMIT :batch) AS w;

-- name: retention_prunable_occurrences
-- :before here is already the later of the cutoff and the guard's floor (catch-up window, business periods).
-- The newest occurrence of each schedule stays (the clock's cursor), and so does any with an unfinished run.
SELECT o.id FROM occurrences o
WHERE o.id > :after AND o.id <= :hi AND o.fire_at < :before AND o.created_at < :before
  AND EXISTS (SELECT 1 FROM occurrences n WHERE n.schedule_key = o.schedule_key AND n.fire_at > o.fire_at)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE (j.run_of = o.id OR j.occurrence_id = o.id)
                  AND j.state IN ('available', 'scheduled', 'running', 'retryable'));

-- name: retention_events_window
SELECT max(id) AS hi, count(*) AS n FROM (SELECT id FROM events WHERE id > :after ORDER BY id LIMIT :batch) AS w;

-- name: retention_prunable_events
SELECT id FROM events WHERE id > :after AND id <= :hi AND at < :before;

-- name: retention_processes_window
SELECT max(id) AS hi, count(*) AS n FROM (SELECT id FROM processes WHERE id > :after ORDER BY id LIMIT :batch) AS w;

-- name: retention_prunable_processes
-- Processes that stopped (or stopped heartbeating) before the cutoff, unless an effect of theirs is unresolved,
-- a job is still leased to them, or an occurrence the ledger keeps names them as its source (the doctor tells a
-- registered clock from a leftover trigger by that row).
SELECT p.id FROM processes p
WHERE p.id > :after AND p.id <= :hi AND COALESCE(p.stopped_at, p.heartbeat_at) < :before
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.state <> 'done' AND e.process_id = p.id)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'running' AND j.worker_id = p.id)
  AND NOT EXISTS (SELECT 1 FROM occurrences o WHERE o.source_host = p.host AND o.source_pid = p.pid);

-- name: retention_effects_window
SELECT max(key) AS hi, count(*) AS n FROM (SELECT key FROM effects WHERE key > :after ORDER BY key LIMIT :batch) AS w;

-- name: retention_floor
-- The longest catch-up window of any schedule (seconds): occurrences inside it decide what a clock fires.
SELECT COALESCE(max(catchup_window), 0) AS catchup_window FROM schedules;
