-- PostgreSQL's versions of the oncebeat.audit queries that differ from common/audit.sql (each replaces the
-- block of the same name there); a block not in common/audit.sql is written for each backend.

-- name: insert_events
-- Many audit events of one process at once. :rows is one JSON array of [kind, subject, detail].
INSERT INTO events (at, kind, subject, process_id, source_kind, source_host, source_pid, source_name,
                    source_version, detail)
SELECT CAST(:now AS timestamptz), r ->> 0, r ->> 1, CAST(:process_id AS bigint), CAST(:src_kind AS text),
       CAST(:src_host AS text), CAST(:src_pid AS integer), CAST(:src_name AS text), CAST(:src_version AS text), r -> 2
FROM jsonb_array_elements(CAST(:rows AS jsonb)) AS r;
