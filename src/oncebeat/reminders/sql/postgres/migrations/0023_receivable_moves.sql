-- reminders 0023: the receivables' moves kept as the invoices change, so DSO and CEI (the Reports page, the API,
-- `oncebeat report`) read a few hundred rows instead of every invoice (issue 27 item 5, docs/benchmarks.md
-- "round 3c: reports").
--
-- receivable_moves: per (currency, month, kind) the amounts (minor units) and counts of invoices whose running
-- sums give each month end's receivables, with the kinds of report_receivable_moves_from_invoices (the reference,
-- sql/postgres/reports.sql): sales, settled, current_in, current_out, undated. Each change of an invoice that
-- can move a figure adds rows of differences (its old moves negated, its new ones): writers only ever insert, so
-- concurrent imports and payments never wait on one another's summary rows (as invoice_open_totals, 0022). The
-- scan folds the rows into one per key each day (compact_receivable_moves); the report sums whatever rows there
-- are, so it equals the figures of the invoices themselves at every moment
-- (tests/acceptance/test_receivable_moves.py compares them). month is 'YYYY-MM' (to_char), as the reference's.
CREATE TABLE receivable_moves (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    currency TEXT NOT NULL,
    month    TEXT NOT NULL,
    kind     TEXT NOT NULL,
    amount   BIGINT NOT NULL,
    n        BIGINT NOT NULL
);
CREATE INDEX receivable_moves_key ON receivable_moves (currency, month, kind);

-- The moves of one invoice (the rules of report_receivable_moves_from_invoices, written once here for the
-- triggers and the backfill): one row per kind it enters, each with its amount and a count of 1. A plain SQL
-- function, so the planner inlines it where it is called.
CREATE FUNCTION receivable_moves_of(st TEXT, amt BIGINT, issued DATE, due DATE, paid DATE)
RETURNS TABLE (month TEXT, kind TEXT, amount BIGINT, n BIGINT) LANGUAGE sql STABLE AS $$
    SELECT m.month, m.kind, m.amount, CAST(1 AS BIGINT) FROM (VALUES
        (to_char(issued, 'YYYY-MM'), 'sales', amt, st <> 'void'),
        (to_char(GREATEST(paid, issued), 'YYYY-MM'), 'settled', amt, st = 'paid' AND paid IS NOT NULL),
        (to_char(issued, 'YYYY-MM'), 'current_in', amt,
         st <> 'void' AND due >= issued AND NOT (st = 'paid' AND paid IS NOT NULL AND paid <= issued)),
        (to_char(LEAST(due + 1, CASE WHEN st = 'paid' AND paid IS NOT NULL THEN paid ELSE DATE '9999-12-31' END),
                 'YYYY-MM'), 'current_out', amt,
         st <> 'void' AND due >= issued AND NOT (st = 'paid' AND paid IS NOT NULL AND paid <= issued)),
        (to_char(issued, 'YYYY-MM'), 'undated', CAST(0 AS BIGINT), st = 'paid' AND paid IS NULL)
    ) AS m (month, kind, amount, keep) WHERE m.keep
$$;

-- (Semicolons open the lines of the function body: the migration runner splits statements at a ';' ending a line.)
CREATE FUNCTION receivable_moves_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM receivable_moves
        ; RETURN NULL
    ; END IF
    ; IF TG_OP = 'UPDATE' THEN
        INSERT INTO receivable_moves (currency, month, kind, amount, n)
        SELECT OLD.currency, m.month, m.kind, -m.amount, -m.n
        FROM receivable_moves_of(OLD.status, OLD.amount_due, OLD.issued_on, OLD.due_on, OLD.paid_on) AS m
        UNION ALL
        SELECT NEW.currency, m.month, m.kind, m.amount, m.n
        FROM receivable_moves_of(NEW.status, NEW.amount_due, NEW.issued_on, NEW.due_on, NEW.paid_on) AS m
    ; ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO receivable_moves (currency, month, kind, amount, n)
        SELECT OLD.currency, m.month, m.kind, -m.amount, -m.n
        FROM receivable_moves_of(OLD.status, OLD.amount_due, OLD.issued_on, OLD.due_on, OLD.paid_on) AS m
    ; ELSE
        INSERT INTO receivable_moves (currency, month, kind, amount, n)
        SELECT NEW.currency, m.month, m.kind, m.amount, m.n
        FROM receivable_moves_of(NEW.status, NEW.amount_due, NEW.issued_on, NEW.due_on, NEW.paid_on) AS m
    ; END IF
    ; RETURN NULL
; END
$$;
-- Row triggers, each only where a figure can move: a void invoice moves none; an update that leaves status,
-- currency, amount and the three dates as they were (the scan's pin, a re-import of the same row) runs nothing.
CREATE TRIGGER receivable_moves_insert AFTER INSERT ON invoices
    FOR EACH ROW WHEN (NEW.status <> 'void') EXECUTE FUNCTION receivable_moves_track();
CREATE TRIGGER receivable_moves_update AFTER UPDATE OF status, currency, amount_due, issued_on, due_on, paid_on
    ON invoices FOR EACH ROW WHEN ((OLD.status <> 'void' OR NEW.status <> 'void') AND (OLD.status, OLD.currency,
        OLD.amount_due, OLD.issued_on, OLD.due_on, OLD.paid_on) IS DISTINCT FROM (NEW.status, NEW.currency,
        NEW.amount_due, NEW.issued_on, NEW.due_on, NEW.paid_on))
    EXECUTE FUNCTION receivable_moves_track();
CREATE TRIGGER receivable_moves_delete AFTER DELETE ON invoices
    FOR EACH ROW WHEN (OLD.status <> 'void') EXECUTE FUNCTION receivable_moves_track();
-- A TRUNCATE of invoices (allowed while no reminder refers to them) empties it.
CREATE TRIGGER receivable_moves_truncate AFTER TRUNCATE ON invoices
    FOR EACH STATEMENT EXECUTE FUNCTION receivable_moves_track();

INSERT INTO receivable_moves (currency, month, kind, amount, n)
SELECT i.currency, m.month, m.kind, SUM(m.amount), SUM(m.n)
FROM invoices i, receivable_moves_of(i.status, i.amount_due, i.issued_on, i.due_on, i.paid_on) AS m
GROUP BY i.currency, m.month, m.kind;
