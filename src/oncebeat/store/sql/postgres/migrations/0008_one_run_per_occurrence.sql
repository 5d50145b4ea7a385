-- engine 0008: at most one unfinished run per occurrence (issue 21 item 5). jobs.run_of is the occurrence a run
-- serves, set when the ledger links an occurrence to its job (the run): its own occurrence, or for a make-up run
-- (`occurrences rerun`, a chain of rerun_of) the first occurrence of the chain (the lowest id on it: a re-run is
-- recorded after what it re-runs). A job a task enqueues carrying the occurrence id (a fan-out) is no run: NULL
-- (so is a copy of a run that resolving an effect made before this version: no occurrence links to it).
-- The partial unique index jobs_one_run_per_occurrence admits one unfinished job per run_of, so a second run of
-- one occurrence — a re-run, an operator's retry of the original, a copy — is refused by the database, however
-- many operators and processes ask at once (oncebeat.errors.RunUnfinished names the run that holds it).
ALTER TABLE jobs ADD COLUMN run_of BIGINT;
UPDATE jobs SET run_of = COALESCE((
    WITH RECURSIVE up(id, parent) AS (
        SELECT id, rerun_of FROM occurrences WHERE id = jobs.occurrence_id
        UNION ALL SELECT o.id, o.rerun_of FROM occurrences o JOIN up ON o.id = up.parent)
    SELECT MIN(COALESCE(parent, id)) FROM up), occurrence_id)
WHERE occurrence_id IS NOT NULL AND id = (SELECT l.job_id FROM occurrences l WHERE l.id = jobs.occurrence_id);
-- A database may already hold two unfinished runs of one occurrence (the fault this fixes). One is kept: a
-- running one first, else the oldest. Each other one that has not started is cancelled, with an entry in its
-- errors and an audit event saying why (an operator may retry it once the kept run has finished); one already
-- running cannot be stopped: it is left to finish outside the rule (run_of NULL; a retry of it later counts it
-- again) and an audit event names it.
CREATE TEMP TABLE run_of_extra ON COMMIT DROP AS
SELECT j.id, j.state, j.run_of, j.attempt,
       (SELECT k.id FROM jobs k WHERE k.run_of = j.run_of AND k.state IN ('available', 'scheduled', 'running', 'retryable')
        ORDER BY k.state <> 'running', k.id LIMIT 1) AS kept
FROM jobs j
WHERE j.run_of IS NOT NULL AND j.state IN ('available', 'scheduled', 'running', 'retryable');
DELETE FROM run_of_extra WHERE id = kept;
INSERT INTO events (at, kind, subject, process_id, source_kind, source_host, source_pid, source_name, source_version,
                    detail)
SELECT clock_timestamp(), CASE WHEN state = 'running' THEN 'job.duplicate_run' ELSE 'job.cancelled' END,
       'job:' || id, NULL, 'migration', '', 0, 'engine migration 0008', '',
       jsonb_build_object('by', 'engine migration 0008', 'occurrence_id', run_of, 'kept', kept, 'state', state,
                          'reason', CASE WHEN state = 'running'
                              THEN 'a second run of the occurrence, already running: left to finish'
                              ELSE 'a second unfinished run of the occurrence: cancelled (retry it once the kept run has finished)' END)
FROM run_of_extra ORDER BY id;
UPDATE jobs SET state = 'cancelled', finished_at = clock_timestamp(), lease_expires_at = NULL,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', jobs.attempt,
        'at', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'), 'kind', 'cancelled',
        'error', 'cancelled by engine migration 0008: occurrence ' || x.run_of || ' already had run ' || x.kept
                 || ' unfinished (at most one unfinished run per occurrence)'))
FROM run_of_extra x
WHERE x.id = jobs.id AND x.state <> 'running';
UPDATE jobs SET run_of = NULL WHERE id IN (SELECT id FROM run_of_extra WHERE state = 'running');
CREATE UNIQUE INDEX jobs_one_run_per_occurrence ON jobs (run_of)
    WHERE run_of IS NOT NULL AND state IN ('available', 'scheduled', 'running', 'retryable');
