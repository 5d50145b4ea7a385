-- Queries of oncebeat.processes, written once for both backends. sqlite/processes.sql and postgres/processes.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: register_process
INSERT INTO processes (role, host, pid, name, version, tz_env, info, started_at, heartbeat_at)
VALUES (:role, :host, :pid, :name, :version, :tz_env, :info, :now, :now)
RETURNING id;

-- name: heartbeat_process
UPDATE processes SET heartbeat_at = :now WHERE id = :id;

-- name: stop_process
UPDATE processes SET stopped_at = :now, heartbeat_at = :now WHERE id = :id;

-- name: list_processes
SELECT * FROM processes ORDER BY id;

-- name: list_running_processes
SELECT * FROM processes WHERE stopped_at IS NULL ORDER BY id;
