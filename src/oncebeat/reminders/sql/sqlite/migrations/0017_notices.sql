-- reminders 0017: one notice per customer (issue 24 item 1, DESIGN G9). With group = "customer" in a ladder, the
-- reminders of one customer due on one business date under one ladder version go out in ONE email, a notice: one
-- effect (key notice-colon-id) frozen at its first attempt. Each (invoice, stage) row it lists points to it
-- (reminders.notice_id) and carries its Message-ID. state: pending (open for rows until assigned_at), sent,
-- in_doubt (a lost reply: the notice and every row it lists), failed, skipped (no row left to send).
CREATE TABLE notices (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    customer_id       INTEGER NOT NULL REFERENCES customers (id),
    business_date     DATE NOT NULL,
    ladder_version_id INTEGER NOT NULL REFERENCES ladder_versions (id),
    effect_key        TEXT,
    state             TEXT NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending', 'sent', 'in_doubt', 'failed', 'skipped')),
    reason            TEXT,
    message_id        TEXT,
    deferred_since    TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL,
    assigned_at       TIMESTAMPTZ,
    frozen_at         TIMESTAMPTZ,
    sent_at           TIMESTAMPTZ,
    updated_at        TIMESTAMPTZ NOT NULL,
    UNIQUE (customer_id, business_date, ladder_version_id)
);
ALTER TABLE reminders ADD COLUMN notice_id INTEGER REFERENCES notices (id);
CREATE INDEX reminders_notice ON reminders (notice_id) WHERE notice_id IS NOT NULL;
