-- PostgreSQL's versions of the oncebeat.audit queries that differ from common/audit.sql (each replaces the
-- block of the same name there); a block not in common/audit.sql is written for each backend.

-- name: list_events
SELECT * FROM events
WHERE (CAST(:subject AS text) IS NULL OR subject = :subject) AND (CAST(:kind AS text) IS NULL OR kind = :kind) AND at >= :since
ORDER BY id;
