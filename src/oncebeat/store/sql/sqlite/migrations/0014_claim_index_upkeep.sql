-- engine 0014 (SQLite): a job's state change maintains fewer indexes, each more cheaply (issue 27 target 3).
-- Every UPDATE of jobs.state re-evaluates the WHERE of each partial index that names state, for the old row and
-- the new one, and deletes or inserts its entry. Written `state IN ('a', 'b', 'c')`, each evaluation of a list of
-- three or more constants probes an ephemeral b-tree that the statement first fills; written as ORs it is a few
-- comparisons. The claim's and the completion's statements take ~0.6 of their CPU with this migration
-- (docs/benchmarks.md, "### 10. SQLite drain, round 3c").
-- SQLite uses a partial index only when the query's WHERE implies the index's: the engine's SQLite queries spell
-- their literal state lists as ORs too, in the same order (oncebeat.store.sqlfiles.to_sqlite), and a query that
-- names one state (`state = 'running'`) now implies an index on several, which an IN list never did.
-- jobs_state_id_resting (engine 0013) is dropped: no SQLite statement reads it (the job list's state filter is
-- `:state IS NULL OR state = :state`, which SQLite cannot match to an index; it walks the primary key backwards,
-- as it did with the index: tests/backends/test_sqlite_plans.py), and it cost one entry on every enqueue and
-- the evaluation of a six-state list on every state change. PostgreSQL keeps it (its 0014 is empty).
DROP INDEX jobs_state_id_resting;
DROP INDEX jobs_fetch;
CREATE INDEX jobs_fetch ON jobs (queue, priority, run_at, id)
    WHERE state = 'available' OR state = 'scheduled' OR state = 'retryable';
DROP INDEX jobs_unfinished_queue;
CREATE INDEX jobs_unfinished_queue ON jobs (queue, state)
    WHERE state = 'available' OR state = 'scheduled' OR state = 'running' OR state = 'retryable';
DROP INDEX jobs_unique_key;
CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL
      AND (state = 'available' OR state = 'scheduled' OR state = 'running' OR state = 'retryable');
DROP INDEX jobs_one_run_per_occurrence;
CREATE UNIQUE INDEX jobs_one_run_per_occurrence ON jobs (run_of)
    WHERE run_of IS NOT NULL
      AND (state = 'available' OR state = 'scheduled' OR state = 'running' OR state = 'retryable');
