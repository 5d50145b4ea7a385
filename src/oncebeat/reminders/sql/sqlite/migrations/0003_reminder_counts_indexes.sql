-- reminders 0003 (0.1's 0007): the reminder app's dashboard and /metrics read counts from indexes, not from the tables:
-- reminders per stage and state (page), unfinished ones (the scrape), open amounts per currency (aging).
CREATE INDEX reminders_stage_state ON reminders (stage, state);
CREATE INDEX reminders_unfinished ON reminders (stage, state) WHERE state IN ('pending', 'in_doubt');
CREATE INDEX invoices_open_aging ON invoices (currency, due_on, amount_due) WHERE status = 'open';
