-- engine 0005 (0.1's 0010): run-time schedule edits and make-up runs.
-- origin: 'code' (synced from code/config) or 'runtime' (`schedules set`, the dashboard, the Python API);
-- code_hash: the code definition a run-time edit overrides (a deploy that changes it replaces the edit);
-- rerun_of: the occurrence a manual make-up run (`occurrences rerun`) re-runs.
ALTER TABLE schedules ADD COLUMN origin TEXT NOT NULL DEFAULT 'code' CHECK (origin IN ('code', 'runtime'));
ALTER TABLE schedules ADD COLUMN code_hash TEXT;
ALTER TABLE occurrences ADD COLUMN rerun_of BIGINT;
