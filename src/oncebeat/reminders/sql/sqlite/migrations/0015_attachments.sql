-- reminders 0015: attachments (issue 24 item 3). invoices.pdf_path: the invoice's PDF, a path inside
-- [attachments] pdf_dir (CSV column pdf_path, the SQL source's AS pdf_path); NULL: <pdf_dir>/<number>.pdf.
-- reminder_attachments: the files of each reminder's frozen message (name, type, size, SHA-256 and bytes), written
-- when the send job hands that message to the server; the effect ledger drops its frozen copy once done, this
-- keeps what the customer received for the invoice page (shown and downloaded). Reminders are never pruned.
ALTER TABLE invoices ADD COLUMN pdf_path TEXT;
CREATE TABLE reminder_attachments (
    reminder_id  BIGINT NOT NULL REFERENCES reminders (id),
    position     INTEGER NOT NULL,
    filename     TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size         BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    content      BLOB NOT NULL,
    recorded_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (reminder_id, position)
);
