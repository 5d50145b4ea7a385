-- reminders 0018: late fees, one per (invoice, stage) (issue 24 item 4, DESIGN G9). A fee is written in the
-- transaction that records its stage's reminder sent (oncebeat.reminders.notices.fees), computed from the stage's
-- rule in the invoice's pinned ladder version and the amount the notice showed (its X-Oncebeat-Fee header);
-- the primary key makes a retry, a resend, a rerun or a retry of failed reminders add nothing. amount: minor
-- units of currency. basis: fixed or percent; rule: the rule in words (1.5 % (cap 5000)). oncebeat reports fees,
-- it posts them to no ledger (oncebeat report fees --csv is the export).
CREATE TABLE reminder_fees (
    invoice_id  BIGINT NOT NULL REFERENCES invoices (id),
    stage       INTEGER NOT NULL,
    reminder_id BIGINT NOT NULL REFERENCES reminders (id),
    amount      BIGINT NOT NULL CHECK (amount > 0),
    currency    TEXT NOT NULL,
    basis       TEXT NOT NULL CHECK (basis IN ('fixed', 'percent')),
    rule        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (invoice_id, stage)
);
CREATE INDEX reminder_fees_created ON reminder_fees (created_at);
