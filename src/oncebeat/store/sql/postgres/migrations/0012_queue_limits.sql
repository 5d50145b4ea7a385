-- engine 0012: a queue's concurrency limit (issue 26 item 5). A queue named here never has more than max_running
-- jobs running at once, summed over every worker in every process and host: a claim of a limited queue first locks
-- its row here, then counts the queue's running jobs, then takes at most what is left (oncebeat.queue.Queue.claim),
-- so two workers cannot both see the last free slot. A claim that does not know of the limit yet (a worker that
-- read the limits before it was set) takes nothing from the queue: the claim statement itself checks this table.
-- Deleting the row lifts the limit. Who set it and when are kept here and in the audit trail (queue.limited).
CREATE TABLE queue_limits (
    queue          TEXT PRIMARY KEY,
    max_running    INTEGER NOT NULL CHECK (max_running >= 1),
    set_at         TIMESTAMPTZ NOT NULL,
    source_kind    TEXT NOT NULL,
    source_host    TEXT NOT NULL,
    source_pid     INTEGER NOT NULL,
    source_name    TEXT NOT NULL,
    source_version TEXT NOT NULL
);
