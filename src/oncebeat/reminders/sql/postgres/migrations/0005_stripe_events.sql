-- reminders 0005 (0.1's 0009): Stripe webhook events, one row per event id: the claim that makes applying an event idempotent
-- (a replayed delivery finds its row and changes nothing) and the audit of what each event did.
CREATE TABLE stripe_events (
    id             TEXT PRIMARY KEY,
    type           TEXT NOT NULL,
    invoice_number TEXT,
    created        BIGINT,
    received_at    TIMESTAMPTZ NOT NULL,
    outcome        TEXT NOT NULL,
    detail         TEXT
);
CREATE INDEX stripe_events_invoice ON stripe_events (invoice_number);
