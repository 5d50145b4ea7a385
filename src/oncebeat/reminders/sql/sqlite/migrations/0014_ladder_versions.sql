-- 0014 (reminders line): several ladders, pinned per invoice (issue 23 item 2). Each ladder's resolved settings
-- (stages, collapse, spacing, send_at, sender, reply_to, company, templates) are recorded as numbered versions;
-- a new version only when its content hash changed (oncebeat.reminders.pinning.sync_versions, audited).
-- invoices.ladder_version_id: the version the invoice started dunning with (set by the scan when its first stage
-- comes due; moved only by an explicit apply to open invoices); NULL: not in dunning yet.
-- reminders.ladder_version_id: the version the reminder was created under (its templates and sender); NULL: a
-- reminder from before this migration (the default settings of the file).
CREATE TABLE ladder_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    version      INTEGER NOT NULL CHECK (version >= 1),
    content_hash TEXT NOT NULL,
    settings     TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (name, version)
);
ALTER TABLE invoices ADD COLUMN ladder_version_id INTEGER REFERENCES ladder_versions (id);
ALTER TABLE reminders ADD COLUMN ladder_version_id INTEGER REFERENCES ladder_versions (id);
CREATE INDEX invoices_ladder_version ON invoices (ladder_version_id) WHERE status = 'open';
-- The scan pins open invoices not in dunning yet whose first stage came: only those rows, by due date.
CREATE INDEX invoices_unpinned_due ON invoices (due_on) WHERE status = 'open' AND ladder_version_id IS NULL;
