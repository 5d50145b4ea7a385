-- PostgreSQL's versions of the oncebeat.processes queries that differ from common/processes.sql (each replaces the
-- block of the same name there); a block not in common/processes.sql is written for each backend.

-- name: processes_by_ids
SELECT * FROM processes WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id;
