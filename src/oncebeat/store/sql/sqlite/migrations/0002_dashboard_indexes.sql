-- engine 0002 (0.1's 0003): indexes for the dashboard's pages and the /metrics scrape (each answers from an index,
-- whatever the size of the history).

-- Unfinished jobs per queue and state (the jobs gauge, the overview): reads only unfinished work.
CREATE INDEX jobs_unfinished_queue ON jobs (queue, state)
    WHERE state IN ('available', 'scheduled', 'running', 'retryable');
-- Job list filtered by state or task, newest first, keyset on id.
CREATE INDEX jobs_state_id ON jobs (state, id);
CREATE INDEX jobs_task_id ON jobs (task, id);
-- Throughput of the last hour (overview chart).
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
-- Running processes (overview, heartbeat gauges) without reading every restart ever recorded.
CREATE INDEX processes_running ON processes (id) WHERE stopped_at IS NULL;
