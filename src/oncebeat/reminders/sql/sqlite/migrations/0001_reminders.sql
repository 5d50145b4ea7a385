-- reminders 0001 (0.1's 0002): the overdue-invoice domain: customers, invoices, reminders.
-- Money is an integer in minor units plus an ISO 4217 code.

CREATE TABLE customers (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    email   TEXT NOT NULL UNIQUE,
    name    TEXT NOT NULL,
    locale  TEXT NOT NULL DEFAULT 'en_US',
    tz      TEXT NOT NULL DEFAULT 'UTC'
);

CREATE TABLE invoices (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    number      TEXT NOT NULL UNIQUE,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    currency    TEXT NOT NULL,
    amount_due  INTEGER NOT NULL CHECK (amount_due >= 0),
    issued_on   DATE NOT NULL,
    due_on      DATE NOT NULL,
    status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'paid', 'void', 'uncollectible')),
    paid_on     DATE,
    updated_at  TIMESTAMPTZ NOT NULL
);
-- The scan reads open invoices by due date only.
CREATE INDEX invoices_open_due ON invoices (due_on) WHERE status = 'open';

CREATE TABLE reminders (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id    INTEGER NOT NULL REFERENCES invoices (id),
    stage         INTEGER NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'skipped', 'failed', 'in_doubt')),
    reason        TEXT,
    occurrence_id INTEGER,
    business_date DATE NOT NULL,
    message_id    TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    sent_at       TIMESTAMPTZ,
    UNIQUE (invoice_id, stage)
);
CREATE INDEX reminders_occurrence ON reminders (occurrence_id, state);
CREATE INDEX reminders_pending ON reminders (id) WHERE state = 'pending';
