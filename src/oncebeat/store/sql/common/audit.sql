-- Queries of oncebeat.audit, written once for both backends. sqlite/audit.sql and postgres/audit.sql hold only
-- the blocks that differ (each replaces the block of the same name here). Parameters are :name.

-- name: insert_event
INSERT INTO events (at, kind, subject, process_id, source_kind, source_host, source_pid, source_name,
                    source_version, detail)
VALUES (:now, :kind, :subject, :process_id, :src_kind, :src_host, :src_pid, :src_name, :src_version, :detail);

-- name: list_events
SELECT * FROM events
WHERE (CAST(:subject AS text) IS NULL OR subject = :subject) AND (CAST(:kind AS text) IS NULL OR kind = :kind) AND at >= :since
ORDER BY id;

-- name: count_events_before
SELECT COUNT(*) AS n FROM events WHERE at < :before;

-- name: prune_events
DELETE FROM events WHERE at < :before;

-- name: events_of_subject
SELECT * FROM events WHERE subject = :subject ORDER BY id DESC LIMIT :limit;
