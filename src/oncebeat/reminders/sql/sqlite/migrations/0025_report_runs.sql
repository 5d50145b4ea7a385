-- reminders 0025: stored report runs (issue 27 target 5: /reports under 300 ms at ten million invoices).
--
-- report_runs: the stage-effectiveness report computed asynchronously over one snapshot and kept with the instant
-- it is exact for (Stripe's Reporting API "report runs"). The page reads the newest done run of its parameters
-- when the live query does not finish within its budget (SQLite: never, its page is always live; the CLI's and
-- the API's --stored read them), and always shows that instant beside the numbers. Nothing on the send path
-- writes here: a run is computed by a job (reminders.report_run) reading in one read transaction (one WAL
-- snapshot), then stored by one UPDATE of its own row.
--   params_key   'stages:<first month>:<last month>:<as_of>:<currency or *>' (one key per parameter set; the job's
--                unique key is derived from it, so two requests never compute the same parameters at once)
--   state        queued -> running -> done | failed (error kept)
--   snapshot_at  the clock at the snapshot the rows were read in (UTC)
--   result       the report's rows (JSON: one object per stage and group, counts only)
CREATE TABLE report_runs (
    id          INTEGER PRIMARY KEY,
    report      TEXT NOT NULL,
    params_key  TEXT NOT NULL,
    first_month TEXT NOT NULL,
    last_month  TEXT NOT NULL,
    as_of       DATE NOT NULL,
    currency    TEXT,
    state       TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    job_id      INTEGER,
    snapshot_at TIMESTAMPTZ,
    result      JSON,
    error       TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    started_at  TIMESTAMPTZ,
    finished_at TIMESTAMPTZ
);
-- The newest runs of one parameter set first (the page's read, the prune).
CREATE INDEX report_runs_newest ON report_runs (params_key, id);
