-- reminders 0023: the receivables' moves kept as the invoices change, so DSO and CEI (the Reports page, the API,
-- `oncebeat report`) read a few hundred rows instead of every invoice (issue 27 item 5, docs/benchmarks.md
-- "round 3c: reports").
--
-- receivable_moves: per (currency, month, kind) the amounts (minor units) and counts of invoices whose running
-- sums give each month end's receivables, with the kinds of report_receivable_moves_from_invoices (the reference,
-- sql/sqlite/reports.sql): sales, settled, current_in, current_out, undated. Each change of an invoice that can
-- move a figure adds rows of differences (its old moves negated, its new ones): writers only ever insert (as
-- invoice_open_totals, 0022). The scan folds the rows into one per key each day (compact_receivable_moves); the
-- report sums whatever rows there are, so it equals the figures of the invoices themselves at every moment
-- (tests/acceptance/test_receivable_moves.py compares them). month is 'YYYY-MM', as the reference's.
CREATE TABLE receivable_moves (
    id       INTEGER PRIMARY KEY,
    currency TEXT NOT NULL,
    month    TEXT NOT NULL,
    kind     TEXT NOT NULL,
    amount   INTEGER NOT NULL,
    n        INTEGER NOT NULL
);
CREATE INDEX receivable_moves_key ON receivable_moves (currency, month, kind);

-- The moves of one invoice (SQLite has no SQL functions: the rules of report_receivable_moves_from_invoices are
-- written here for the triggers, with the invoice's old values negated (sign -1) and its new ones (sign 1)).
-- (Semicolons open the lines of a trigger's body: the migration runner splits statements at a ';' ending a line.)
CREATE TRIGGER receivable_moves_insert AFTER INSERT ON invoices FOR EACH ROW WHEN NEW.status <> 'void'
BEGIN
    INSERT INTO receivable_moves (currency, month, kind, amount, n)
    SELECT NEW.currency, month, kind, amount, 1 FROM (
        SELECT substr(NEW.issued_on, 1, 7) AS month, 'sales' AS kind, NEW.amount_due AS amount, 1 AS keep
        UNION ALL
        SELECT substr(MAX(NEW.paid_on, NEW.issued_on), 1, 7), 'settled', NEW.amount_due,
               NEW.status = 'paid' AND NEW.paid_on IS NOT NULL
        UNION ALL
        SELECT substr(NEW.issued_on, 1, 7), 'current_in', NEW.amount_due,
               NEW.due_on >= NEW.issued_on AND NOT (NEW.status = 'paid' AND NEW.paid_on IS NOT NULL AND NEW.paid_on <= NEW.issued_on)
        UNION ALL
        SELECT substr(MIN(date(NEW.due_on, '+1 day'), CASE WHEN NEW.status = 'paid' AND NEW.paid_on IS NOT NULL
                                                          THEN NEW.paid_on ELSE '9999-12-31' END), 1, 7),
               'current_out', NEW.amount_due,
               NEW.due_on >= NEW.issued_on AND NOT (NEW.status = 'paid' AND NEW.paid_on IS NOT NULL AND NEW.paid_on <= NEW.issued_on)
        UNION ALL
        SELECT substr(NEW.issued_on, 1, 7), 'undated', 0, NEW.status = 'paid' AND NEW.paid_on IS NULL
    ) WHERE keep
; END;
-- Only where a figure can move: an update that leaves status, currency, amount and the three dates as they were
-- (the scan's pin, a re-import of the same row) adds nothing.
CREATE TRIGGER receivable_moves_update AFTER UPDATE OF status, currency, amount_due, issued_on, due_on, paid_on
ON invoices FOR EACH ROW WHEN (OLD.status <> 'void' OR NEW.status <> 'void') AND NOT (OLD.status IS NEW.status
    AND OLD.currency IS NEW.currency AND OLD.amount_due IS NEW.amount_due AND OLD.issued_on IS NEW.issued_on
    AND OLD.due_on IS NEW.due_on AND OLD.paid_on IS NEW.paid_on)
BEGIN
    INSERT INTO receivable_moves (currency, month, kind, amount, n)
    SELECT currency, month, kind, sign * amount, sign FROM (
        SELECT OLD.currency AS currency, -1 AS sign, substr(OLD.issued_on, 1, 7) AS month, 'sales' AS kind,
               OLD.amount_due AS amount, OLD.status <> 'void' AS keep
        UNION ALL
        SELECT OLD.currency, -1, substr(MAX(OLD.paid_on, OLD.issued_on), 1, 7), 'settled', OLD.amount_due,
               OLD.status = 'paid' AND OLD.paid_on IS NOT NULL
        UNION ALL
        SELECT OLD.currency, -1, substr(OLD.issued_on, 1, 7), 'current_in', OLD.amount_due,
               OLD.status <> 'void' AND OLD.due_on >= OLD.issued_on
               AND NOT (OLD.status = 'paid' AND OLD.paid_on IS NOT NULL AND OLD.paid_on <= OLD.issued_on)
        UNION ALL
        SELECT OLD.currency, -1, substr(MIN(date(OLD.due_on, '+1 day'), CASE WHEN OLD.status = 'paid' AND OLD.paid_on IS NOT NULL
                                                                           THEN OLD.paid_on ELSE '9999-12-31' END), 1, 7),
               'current_out', OLD.amount_due,
               OLD.status <> 'void' AND OLD.due_on >= OLD.issued_on
               AND NOT (OLD.status = 'paid' AND OLD.paid_on IS NOT NULL AND OLD.paid_on <= OLD.issued_on)
        UNION ALL
        SELECT OLD.currency, -1, substr(OLD.issued_on, 1, 7), 'undated', 0, OLD.status = 'paid' AND OLD.paid_on IS NULL
        UNION ALL
        SELECT NEW.currency, 1, substr(NEW.issued_on, 1, 7), 'sales', NEW.amount_due, NEW.status <> 'void'
        UNION ALL
        SELECT NEW.currency, 1, substr(MAX(NEW.paid_on, NEW.issued_on), 1, 7), 'settled', NEW.amount_due,
               NEW.status = 'paid' AND NEW.paid_on IS NOT NULL
        UNION ALL
        SELECT NEW.currency, 1, substr(NEW.issued_on, 1, 7), 'current_in', NEW.amount_due,
               NEW.status <> 'void' AND NEW.due_on >= NEW.issued_on
               AND NOT (NEW.status = 'paid' AND NEW.paid_on IS NOT NULL AND NEW.paid_on <= NEW.issued_on)
        UNION ALL
        SELECT NEW.currency, 1, substr(MIN(date(NEW.due_on, '+1 day'), CASE WHEN NEW.status = 'paid' AND NEW.paid_on IS NOT NULL
                                                                          THEN NEW.paid_on ELSE '9999-12-31' END), 1, 7),
               'current_out', NEW.amount_due,
               NEW.status <> 'void' AND NEW.due_on >= NEW.issued_on
               AND NOT (NEW.status = 'paid' AND NEW.paid_on IS NOT NULL AND NEW.paid_on <= NEW.issued_on)
        UNION ALL
        SELECT NEW.currency, 1, substr(NEW.issued_on, 1, 7), 'undated', 0, NEW.status = 'paid' AND NEW.paid_on IS NULL
    ) WHERE keep
; END;
CREATE TRIGGER receivable_moves_delete AFTER DELETE ON invoices FOR EACH ROW WHEN OLD.status <> 'void'
BEGIN
    INSERT INTO receivable_moves (currency, month, kind, amount, n)
    SELECT OLD.currency, month, kind, -amount, -1 FROM (
        SELECT substr(OLD.issued_on, 1, 7) AS month, 'sales' AS kind, OLD.amount_due AS amount, 1 AS keep
        UNION ALL
        SELECT substr(MAX(OLD.paid_on, OLD.issued_on), 1, 7), 'settled', OLD.amount_due,
               OLD.status = 'paid' AND OLD.paid_on IS NOT NULL
        UNION ALL
        SELECT substr(OLD.issued_on, 1, 7), 'current_in', OLD.amount_due,
               OLD.due_on >= OLD.issued_on AND NOT (OLD.status = 'paid' AND OLD.paid_on IS NOT NULL AND OLD.paid_on <= OLD.issued_on)
        UNION ALL
        SELECT substr(MIN(date(OLD.due_on, '+1 day'), CASE WHEN OLD.status = 'paid' AND OLD.paid_on IS NOT NULL
                                                          THEN OLD.paid_on ELSE '9999-12-31' END), 1, 7),
               'current_out', OLD.amount_due,
               OLD.due_on >= OLD.issued_on AND NOT (OLD.status = 'paid' AND OLD.paid_on IS NOT NULL AND OLD.paid_on <= OLD.issued_on)
        UNION ALL
        SELECT substr(OLD.issued_on, 1, 7), 'undated', 0, OLD.status = 'paid' AND OLD.paid_on IS NULL
    ) WHERE keep
; END;

INSERT INTO receivable_moves (currency, month, kind, amount, n)
SELECT currency, month, kind, SUM(amount), SUM(n) FROM (
    SELECT currency, substr(issued_on, 1, 7) AS month, 'sales' AS kind, amount_due AS amount, 1 AS n
    FROM invoices WHERE status <> 'void'
    UNION ALL
    SELECT currency, substr(MAX(paid_on, issued_on), 1, 7), 'settled', amount_due, 1
    FROM invoices WHERE status = 'paid' AND paid_on IS NOT NULL
    UNION ALL
    SELECT currency, substr(issued_on, 1, 7), 'current_in', amount_due, 1
    FROM invoices
    WHERE status <> 'void' AND due_on >= issued_on AND NOT (status = 'paid' AND paid_on IS NOT NULL AND paid_on <= issued_on)
    UNION ALL
    SELECT currency, substr(MIN(date(due_on, '+1 day'), CASE WHEN status = 'paid' AND paid_on IS NOT NULL THEN paid_on
                                                             ELSE '9999-12-31' END), 1, 7), 'current_out', amount_due, 1
    FROM invoices
    WHERE status <> 'void' AND due_on >= issued_on AND NOT (status = 'paid' AND paid_on IS NOT NULL AND paid_on <= issued_on)
    UNION ALL
    SELECT currency, substr(issued_on, 1, 7), 'undated', 0, 1
    FROM invoices WHERE status = 'paid' AND paid_on IS NULL
) AS moves
GROUP BY currency, month, kind;
