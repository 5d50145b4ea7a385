-- Stored report runs (oncebeat.reminders.reports.runs, reminders migration 0025): the stage-effectiveness report
-- computed over one snapshot by a job and kept with its snapshot instant; the Reports page reads the newest one
-- when the live query does not finish within its budget. No statement here touches invoices or reminders.

-- name: report_run_insert
-- A run asked for (state queued); its job is enqueued in the same transaction.
INSERT INTO report_runs (report, params_key, first_month, last_month, as_of, currency, state, created_at)
VALUES (:report, :params_key, :first_month, :last_month, :as_of, CAST(:currency AS text), 'queued', :now)
RETURNING id;

-- name: report_run_set_job
UPDATE report_runs SET job_id = :job_id WHERE id = :id;

-- name: report_run_start
-- The job begins (again, after a rescue): running, any earlier attempt's error cleared. Returns its parameters.
UPDATE report_runs SET state = 'running', started_at = :now, error = NULL
WHERE id = :id
RETURNING id, report, params_key, first_month, last_month, as_of, currency, created_at, started_at;

-- name: report_run_done
UPDATE report_runs SET state = 'done', snapshot_at = :snapshot_at, result = :result, finished_at = :now,
                       error = NULL
WHERE id = :id;

-- name: report_run_failed
UPDATE report_runs SET state = 'failed', error = :error, finished_at = :now WHERE id = :id;

-- name: report_runs_prune
-- Keep the newest :keep done runs of a parameter set (and the newer rows still queued or running); drop older
-- rows of it, whatever their state: a queued or running row older than the run that just finished lost its job
-- (the unique key admits one unfinished job per parameter set, and that one was this run's).
DELETE FROM report_runs
WHERE params_key = :params_key AND id < :id
  AND id NOT IN (SELECT id FROM report_runs WHERE params_key = :params_key AND state = 'done'
                 ORDER BY id DESC LIMIT :keep);

-- name: report_runs_prune_old
-- Runs of parameter sets nobody asked for since :before (yesterday's as_of, a range once looked at).
DELETE FROM report_runs WHERE created_at < :before AND state IN ('done', 'failed');

-- name: report_run_newest_done
SELECT id, report, params_key, first_month, last_month, as_of, currency, state, snapshot_at, result, created_at,
       started_at, finished_at
FROM report_runs WHERE params_key = :params_key AND state = 'done' ORDER BY id DESC LIMIT 1;

-- name: report_run_newest
-- The newest row of a parameter set, in any state (is one queued or running after the newest done one?).
SELECT id, state, job_id, created_at, started_at, error FROM report_runs
WHERE params_key = :params_key ORDER BY id DESC LIMIT 1;
