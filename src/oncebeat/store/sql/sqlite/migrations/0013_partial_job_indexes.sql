-- engine 0013: the job list's indexes take no entry on the claim path (issue 27 item 2).
-- A job's row is updated twice on its way through (claim, completion) and each update writes one entry into every
-- index whose predicate the new row meets. The full indexes of engine 0002 on (state, id) and (task, id) took one
-- on both updates (PostgreSQL; SQLite rewrites the state one), which made the drain about 1.27 times slower.
-- The state index now holds only the states a job rests in off that path: waiting (written at enqueue, as before)
-- and failed or stopped; a job that is running or completed has no entry. The dashboard's job list finds those two
-- states otherwise: running jobs are few (jobs_running_lease), and completed ones are most of the history (the
-- primary key walked backwards meets one within a few rows). A task filter walks the primary key as well.
DROP INDEX jobs_state_id;
DROP INDEX jobs_task_id;
CREATE INDEX jobs_state_id_resting ON jobs (state, id)
    WHERE state IN ('available', 'scheduled', 'retryable', 'discarded', 'cancelled', 'in_doubt');
