-- reminders 0013: the per-customer cap and the payment-freshness fence (issue 23 items 4 and 5).
--
-- state 'deferred' (NOT final): the cap ([reminders] max_notices_per_week) held this reminder back; it keeps its
-- (invoice, stage) row and its send job, which is snoozed until the next allowed day and then sends it (sent).
-- cap_day: the customer's business date whose allowance this reminder took (set when it claimed a place under
-- the cap, before its email was attempted); capped_at: when the cap first deferred it (kept once sent, so a
-- row shows "deferred, then sent"); cap_reason: the cap's last sentence about it.
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt as 0009 did (same rows, ids, sequence,
-- indexes; nothing references reminders).
ALTER TABLE reminders RENAME TO reminders_before_0013;
CREATE TABLE reminders (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id        INTEGER NOT NULL REFERENCES invoices (id),
    stage             INTEGER NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'skipped', 'failed', 'in_doubt', 'held',
                                                     'deferred')),
    reason            TEXT,
    occurrence_id     INTEGER,
    business_date     DATE NOT NULL,
    message_id        TEXT,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    sent_at           TIMESTAMPTZ,
    deferred_since    TIMESTAMPTZ,
    superseded_stages TEXT,
    hold_id           INTEGER REFERENCES reminder_holds (id),
    resumes_hold_id   INTEGER REFERENCES reminder_holds (id),
    UNIQUE (invoice_id, stage)
);
INSERT INTO reminders (id, invoice_id, stage, state, reason, occurrence_id, business_date, message_id, created_at,
                       updated_at, sent_at, deferred_since, superseded_stages, hold_id, resumes_hold_id)
SELECT id, invoice_id, stage, state, reason, occurrence_id, business_date, message_id, created_at, updated_at,
       sent_at, deferred_since, superseded_stages, hold_id, resumes_hold_id
FROM reminders_before_0013;
DELETE FROM sqlite_sequence WHERE name = 'reminders';
INSERT INTO sqlite_sequence (name, seq) SELECT 'reminders', seq FROM sqlite_sequence WHERE name = 'reminders_before_0013';
DROP TABLE reminders_before_0013;
ALTER TABLE reminders ADD COLUMN cap_day DATE;
ALTER TABLE reminders ADD COLUMN capped_at TIMESTAMPTZ;
ALTER TABLE reminders ADD COLUMN cap_reason TEXT;
CREATE INDEX reminders_occurrence ON reminders (occurrence_id, state);
CREATE INDEX reminders_pending ON reminders (id) WHERE state = 'pending';
CREATE INDEX reminders_stage_state ON reminders (stage, state);
CREATE INDEX reminders_unfinished ON reminders (stage, state) WHERE state IN ('pending', 'in_doubt');
-- The cap counts one customer's claimed places by day; the gauges read the unfinished ones: pending and in doubt
-- (reminders_unfinished) and deferred (this one).
CREATE INDEX reminders_cap_day ON reminders (invoice_id, cap_day) WHERE cap_day IS NOT NULL;
CREATE INDEX reminders_deferred ON reminders (stage, state) WHERE state = 'deferred';

-- payment_watermarks: per source of payment data ('csv', 'stripe', 'api'), the last instant its data was
-- refreshed (a CSV import, a Stripe webhook or sync, an API import). The SQL source's watermark is its last
-- good read in source_reads (0011). With [reminders] max_payment_staleness set, sends wait while the freshest
-- of them is older than that.
CREATE TABLE payment_watermarks (
    source       TEXT PRIMARY KEY,
    refreshed_at TIMESTAMPTZ NOT NULL,
    detail       TEXT
);

-- invoices.payment_processing_since: Stripe said a payment of this invoice is processing (payment_intent.processing,
-- e.g. a bank debit that takes days); its reminders wait until the payment succeeds (the invoice is paid: skipped)
-- or fails or is canceled (cleared: they go out). NULL: none processing.
ALTER TABLE invoices ADD COLUMN payment_processing_since TIMESTAMPTZ;
