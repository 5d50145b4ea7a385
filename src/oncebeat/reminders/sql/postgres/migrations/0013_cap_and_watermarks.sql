-- reminders 0013: the per-customer cap and the payment-freshness fence (issue 23 items 4 and 5).
--
-- state 'deferred' (NOT final): the cap ([reminders] max_notices_per_week) held this reminder back; it keeps its
-- (invoice, stage) row and its send job, which is snoozed until the next allowed day and then sends it (sent).
-- cap_day: the customer's business date whose allowance this reminder took (set when it claimed a place under
-- the cap, before its email was attempted); capped_at: when the cap first deferred it (kept once sent, so a
-- row shows "deferred, then sent"); cap_reason: the cap's last sentence about it.
ALTER TABLE reminders DROP CONSTRAINT IF EXISTS reminders_state_check;
ALTER TABLE reminders ADD CONSTRAINT reminders_state_check
    CHECK (state IN ('pending', 'sent', 'skipped', 'failed', 'in_doubt', 'held', 'deferred'));
ALTER TABLE reminders ADD COLUMN cap_day DATE;
ALTER TABLE reminders ADD COLUMN capped_at TIMESTAMPTZ;
ALTER TABLE reminders ADD COLUMN cap_reason TEXT;
-- The cap counts one customer's claimed places by day; the gauges read the unfinished ones: pending and in doubt
-- (reminders_unfinished, 0003) and deferred (this one).
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
