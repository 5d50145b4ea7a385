-- engine 0015 (PostgreSQL): a claim writes no entry into jobs_unfinished_queue (issue 27 target 2).
-- Every update of a job's row is a new row version that takes an entry in each index whose condition it meets, and
-- no update of jobs can be HOT (each one changes state, which the partial indexes' conditions name). A claim made
-- three (the primary key, jobs_running_lease, jobs_unfinished_queue) against the raw queue loop's one; the
-- (queue, 'running') entries served only counts. The index now holds the unclaimed states, as jobs_fetch does;
-- the running jobs are counted from jobs_running_lease, which every claim already writes (postgres/queue.sql and
-- postgres/pauses.sql read the two apart: count_unfinished_jobs_by_queue, count_unfinished_jobs_capped,
-- queue_job_counts; running_in_queue and running_jobs name state = 'running' alone). It keeps its name, so both
-- backends' schemas name the same indexes; on SQLite it still holds running jobs (its 0015 is empty).
-- Measured without the running entries: the claim's WAL 592 -> 490 records per 100 jobs, server CPU per job -7 to
-- -14 % (docs/benchmarks.md, "Round 3e: running jobs out of the queue index").
DROP INDEX jobs_unfinished_queue;
CREATE INDEX jobs_unfinished_queue ON jobs (queue, state)
    WHERE state IN ('available', 'scheduled', 'retryable');
