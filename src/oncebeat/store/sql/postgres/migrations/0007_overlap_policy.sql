-- engine 0007 (0012 on main before migration lines): overlap policy per schedule (issue 12 item 5): whether a run may start while the previous run of the
-- same schedule is unfinished. 'allow' (the behaviour before it), 'skip' or 'buffer_one'. Enforced when a run
-- is enqueued (oncebeat.clock.fire_occurrence) through the partial unique index jobs_unique_key.
ALTER TABLE schedules ADD COLUMN overlap TEXT NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'buffer_one'));
