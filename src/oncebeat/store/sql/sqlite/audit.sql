-- SQLite's versions of the oncebeat.audit queries that differ from common/audit.sql (each replaces the
-- block of the same name there); a block not in common/audit.sql is written for each backend.

-- name: insert_events
-- Many audit events of one process at once. :rows is one JSON array of [kind, subject, detail].
INSERT INTO events (at, kind, subject, process_id, source_kind, source_host, source_pid, source_name,
                    source_version, detail)
SELECT :now, json_extract(value, '$[0]'), json_extract(value, '$[1]'), :process_id, :src_kind, :src_host, :src_pid,
       :src_name, :src_version, json(json_extract(value, '$[2]'))
FROM json_each(:rows);
