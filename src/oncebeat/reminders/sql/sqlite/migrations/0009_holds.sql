-- 0009 (reminders line): holds (issue 23 item 1). A hold stops reminders of one invoice or of every invoice of
-- one customer, for a reason: dispute, promise (to pay, until a date) or manual. A stage that comes due while
-- held is recorded `held` with the hold's id (a final state: never skipped silently, never sent late); the
-- ladder resumes on the business day the hold's `resumes_on` names.
--
-- holds.resumes_on: the first business date the hold no longer covers. A promise covers up to its
-- promise_until (resumes_on = the next business day after it, set when placed); a release sets it to the
-- next business day after the release's business date (a release never moves it later). NULL: held until
-- released. external_ref: the id of the thing that placed it (a Stripe dispute), one hold per such id.
CREATE TABLE reminder_holds (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id    INTEGER REFERENCES invoices (id),
    customer_id   INTEGER REFERENCES customers (id),
    reason        TEXT NOT NULL CHECK (reason IN ('dispute', 'promise', 'manual')),
    promise_until DATE,
    resumes_on    DATE,
    note          TEXT,
    external_ref  TEXT,
    created_by    TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    released_at   TIMESTAMPTZ,
    released_by   TEXT,
    release_note  TEXT,
    CHECK ((invoice_id IS NULL) <> (customer_id IS NULL)),
    CHECK ((reason = 'promise') = (promise_until IS NOT NULL))
);
CREATE INDEX holds_invoice ON reminder_holds (invoice_id, resumes_on) WHERE invoice_id IS NOT NULL;
CREATE INDEX holds_customer ON reminder_holds (customer_id, resumes_on) WHERE customer_id IS NOT NULL;
CREATE UNIQUE INDEX holds_external_ref ON reminder_holds (external_ref) WHERE external_ref IS NOT NULL;

-- reminders.hold_id: the hold that held this stage (state held). reminders.resumes_hold_id: the hold this
-- reminder is the first after (a missed promise or a released dispute; the template reads promise_missed).
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt with the new state (same rows, same
-- ids, same AUTOINCREMENT sequence, same indexes; nothing references reminders), then gets the two columns.
ALTER TABLE reminders RENAME TO reminders_before_0009;
CREATE TABLE reminders (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    invoice_id        INTEGER NOT NULL REFERENCES invoices (id),
    stage             INTEGER NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'skipped', 'failed', 'in_doubt', 'held')),
    reason            TEXT,
    occurrence_id     INTEGER,
    business_date     DATE NOT NULL,
    message_id        TEXT,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    sent_at           TIMESTAMPTZ,
    deferred_since    TIMESTAMPTZ,
    superseded_stages TEXT,
    UNIQUE (invoice_id, stage)
);
INSERT INTO reminders (id, invoice_id, stage, state, reason, occurrence_id, business_date, message_id, created_at,
                       updated_at, sent_at, deferred_since, superseded_stages)
SELECT id, invoice_id, stage, state, reason, occurrence_id, business_date, message_id, created_at, updated_at,
       sent_at, deferred_since, superseded_stages
FROM reminders_before_0009;
DELETE FROM sqlite_sequence WHERE name = 'reminders';
INSERT INTO sqlite_sequence (name, seq) SELECT 'reminders', seq FROM sqlite_sequence WHERE name = 'reminders_before_0009';
DROP TABLE reminders_before_0009;
CREATE INDEX reminders_occurrence ON reminders (occurrence_id, state);
CREATE INDEX reminders_pending ON reminders (id) WHERE state = 'pending';
CREATE INDEX reminders_stage_state ON reminders (stage, state);
CREATE INDEX reminders_unfinished ON reminders (stage, state) WHERE state IN ('pending', 'in_doubt');
ALTER TABLE reminders ADD COLUMN hold_id INTEGER REFERENCES reminder_holds (id);
ALTER TABLE reminders ADD COLUMN resumes_hold_id INTEGER REFERENCES reminder_holds (id);
