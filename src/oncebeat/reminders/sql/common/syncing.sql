-- Reads of the team's own database (oncebeat.reminders.syncing): the freshness watermark and its history.

-- name: record_source_read
INSERT INTO source_reads (source, started_at, read_at, rows, outcome, error)
VALUES (:source, :started_at, :read_at, :rows, :outcome, :error);

-- name: last_good_source_read
-- The freshness watermark: the newest read that was applied.
SELECT * FROM source_reads WHERE source = :source AND outcome = 'ok' ORDER BY started_at DESC, id DESC LIMIT 1;

-- name: recent_source_reads
SELECT * FROM source_reads ORDER BY id DESC LIMIT :limit;
