-- engine 0006 (0.1's 0011): the effect ledger's edges (issue 9).
-- effects.no_return_at: when the holder passed its point of no return (NULL: nothing has left yet, so a holder
-- that died before it is retried, not doubted). effects.frozen: the effect's input (e.g. the rendered message)
-- frozen at its first attempt and used by every retry or approved resend. Jobs may end 'in_doubt': the handler
-- ran to its end but named effects are in doubt (their keys are in the job's last error entry).

ALTER TABLE effects ADD COLUMN no_return_at TIMESTAMPTZ;
ALTER TABLE effects ADD COLUMN frozen BLOB;
-- Effects started before this version had no point of no return: conservatively, their claim was it.
UPDATE effects SET no_return_at = started_at;

-- SQLite cannot alter a CHECK constraint: the jobs table is rebuilt (rows, ids and the id sequence kept).
ALTER TABLE jobs RENAME TO jobs_before_0011;
CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT NOT NULL DEFAULT 'default',
    task             TEXT NOT NULL,
    args             JSON NOT NULL DEFAULT '{}',
    state            TEXT NOT NULL CHECK (state IN ('available', 'scheduled', 'running', 'retryable', 'completed', 'discarded', 'cancelled', 'in_doubt')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 20,
    run_at           TIMESTAMPTZ NOT NULL,
    lease_expires_at TIMESTAMPTZ,
    worker_id        INTEGER,
    unique_key       TEXT,
    occurrence_id    INTEGER,
    source_kind      TEXT NOT NULL,
    source_host      TEXT NOT NULL,
    source_pid       INTEGER NOT NULL,
    source_name      TEXT NOT NULL,
    source_version   TEXT NOT NULL,
    errors           JSON NOT NULL DEFAULT '[]',
    created_at       TIMESTAMPTZ NOT NULL,
    started_at       TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ
);
INSERT INTO jobs SELECT * FROM jobs_before_0011;
DELETE FROM sqlite_sequence WHERE name = 'jobs';
UPDATE sqlite_sequence SET name = 'jobs' WHERE name = 'jobs_before_0011';
DROP TABLE jobs_before_0011;
-- The database, not code, stops a second unfinished job with the same key.
CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'running', 'retryable');
-- Claim path: the plan must walk this index in order, whatever the statistics say.
CREATE INDEX jobs_fetch ON jobs (queue, priority, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_occurrence ON jobs (occurrence_id) WHERE occurrence_id IS NOT NULL;
-- The dashboard's indexes (0003).
CREATE INDEX jobs_unfinished_queue ON jobs (queue, state)
    WHERE state IN ('available', 'scheduled', 'running', 'retryable');
CREATE INDEX jobs_state_id ON jobs (state, id);
CREATE INDEX jobs_task_id ON jobs (task, id);
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
-- Resolving an effect looks up the jobs waiting in doubt.
CREATE INDEX jobs_in_doubt ON jobs (id) WHERE state = 'in_doubt';
