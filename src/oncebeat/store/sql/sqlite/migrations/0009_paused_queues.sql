-- engine 0009: paused queues (issue 22 item 2). A queue named here is not claimed by any worker, in any process,
-- until it is resumed (its row deleted): the claim statement itself reads this table, so a pause committed before
-- a claim begins is seen by it. Jobs keep their state and run_at while held; nothing is rewritten on pause or
-- resume. Who paused it and when are kept here and in the audit trail (queue.paused / queue.resumed).
CREATE TABLE paused_queues (
    queue          TEXT PRIMARY KEY,
    paused_at      TIMESTAMPTZ NOT NULL,
    source_kind    TEXT NOT NULL,
    source_host    TEXT NOT NULL,
    source_pid     INTEGER NOT NULL,
    source_name    TEXT NOT NULL,
    source_version TEXT NOT NULL
);
