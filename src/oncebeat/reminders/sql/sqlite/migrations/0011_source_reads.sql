-- reminders 0011: one row per read of a team's own database ([source] kind = "sql"), successful or not: the
-- freshness watermark (the started_at of the last 'ok' read: the snapshot the data is at least as fresh as)
-- and the record of a source that was down or refused.
CREATE TABLE source_reads (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    source      TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    read_at     TIMESTAMPTZ NOT NULL,
    rows        INTEGER NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('ok', 'rejected', 'failed')),
    error       TEXT
);
CREATE INDEX source_reads_source ON source_reads (source, outcome, started_at);
