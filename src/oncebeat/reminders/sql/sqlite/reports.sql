-- Collection reports (oncebeat.reminders.reports; docs/reports.md states every formula and rule used here).
-- Each query aggregates in SQL and returns a few rows per (currency, month); no query returns one row per invoice.
-- Dates are ISO text on SQLite (YYYY-MM-DD), so a month is substr(date, 1, 7); PostgreSQL's file uses to_char.
-- Void invoices count nowhere (as if never issued); uncollectible ones stay receivable (never collected).

-- name: report_receivable_moves
-- Per (currency, month, kind): the sums of receivable_moves (reminders 0023: rows of differences the triggers on
-- invoices add, folded daily by compact_receivable_moves), a key whose invoices all left dropped. The same rows as
-- report_receivable_moves_from_invoices (tests/acceptance/test_receivable_moves.py), from a few hundred rows
-- instead of every invoice.
SELECT currency, month, kind, SUM(amount) AS amount, SUM(n) AS n
FROM receivable_moves WHERE :currency IS NULL OR currency = :currency
GROUP BY currency, month, kind HAVING SUM(n) <> 0
ORDER BY currency, month, kind;

-- name: receivable_moves_fold
-- compact_receivable_moves: the rows up to the upto id summed per (currency, month, kind) into new rows (a key that
-- came back to nothing gets none); receivable_moves_drop then deletes the summed rows, in the same transaction
-- (SQLite has one writer at a time, so no row joins in between).
INSERT INTO receivable_moves (currency, month, kind, amount, n)
SELECT currency, month, kind, SUM(amount), SUM(n) FROM receivable_moves WHERE id <= :upto
GROUP BY currency, month, kind HAVING SUM(n) <> 0 OR SUM(amount) <> 0;

-- name: report_receivable_moves_from_invoices
-- The reference: what receivable_moves must always sum to, computed from the invoices themselves (every invoice
-- read; tests/acceptance/test_receivable_moves.py compares them).
-- Per (currency, month, kind): the amounts whose running sums give each month end's receivables.
--   sales:       issued that month (credit sales).
--   settled:     paid that month; the payment date counts from the issue date on (a payment dated before the
--                invoice's issue settles it on issue).
--   current_in:  enters "current" (issued, not past due, unpaid) that month: its issue month.
--   current_out: leaves "current" that month: the month of the day after its due date, or of its payment if
--                earlier. An invoice paid on or before its issue date, or due before its issue date, never is.
--   undated:     paid invoices without a payment date (their month ends cannot be placed): count per issue month.
SELECT currency, month, kind, SUM(amount) AS amount, SUM(n) AS n FROM (
    SELECT currency, substr(issued_on, 1, 7) AS month, 'sales' AS kind, SUM(amount_due) AS amount, COUNT(*) AS n
    FROM invoices WHERE status <> 'void' AND (:currency IS NULL OR currency = :currency)
    GROUP BY currency, substr(issued_on, 1, 7)
    UNION ALL
    SELECT currency, substr(MAX(paid_on, issued_on), 1, 7), 'settled', SUM(amount_due), COUNT(*)
    FROM invoices WHERE status = 'paid' AND paid_on IS NOT NULL AND (:currency IS NULL OR currency = :currency)
    GROUP BY currency, substr(MAX(paid_on, issued_on), 1, 7)
    UNION ALL
    SELECT currency, substr(issued_on, 1, 7), 'current_in', SUM(amount_due), COUNT(*)
    FROM invoices
    WHERE status <> 'void' AND due_on >= issued_on AND NOT (status = 'paid' AND paid_on IS NOT NULL AND paid_on <= issued_on)
      AND (:currency IS NULL OR currency = :currency)
    GROUP BY currency, substr(issued_on, 1, 7)
    UNION ALL
    SELECT currency, substr(MIN(date(due_on, '+1 day'), CASE WHEN status = 'paid' AND paid_on IS NOT NULL THEN paid_on
                                                             ELSE '9999-12-31' END), 1, 7),
           'current_out', SUM(amount_due), COUNT(*)
    FROM invoices
    WHERE status <> 'void' AND due_on >= issued_on AND NOT (status = 'paid' AND paid_on IS NOT NULL AND paid_on <= issued_on)
      AND (:currency IS NULL OR currency = :currency)
    GROUP BY currency, substr(MIN(date(due_on, '+1 day'), CASE WHEN status = 'paid' AND paid_on IS NOT NULL THEN paid_on
                                                                 ELSE '9999-12-31' END), 1, 7)
    UNION ALL
    SELECT currency, substr(issued_on, 1, 7), 'undated', 0, COUNT(*)
    FROM invoices WHERE status = 'paid' AND paid_on IS NULL AND (:currency IS NULL OR currency = :currency)
    GROUP BY currency, substr(issued_on, 1, 7)
) AS moves
GROUP BY currency, month, kind
ORDER BY currency, month, kind;

-- name: report_stage_effectiveness
-- Per (stage, group): how many invoices were still unpaid on the anchor day and, of those whose window of N days
-- after the anchor is over before :as_of (age > N; N = 3, 7, 14), how many were paid within it (d = paid_on -
-- anchor <= N).
--   reminded: anchor = the business date of the stage's sent reminder (reminders.business_date).
--   baseline: anchor = due_on + stage (the day the stage would have gone); invoices not reminded by then (no sent
--     reminder dated on or before the anchor). fr = the day of the invoice's first sent reminder - anchor: an
--     invoice reminded within a window before it paid is left out of that window (its outcome without a reminder
--     is unknown).
-- Anchors in [:start, :end]; void invoices are left out; paid ones without a payment date count in unpaid and
-- undated but in no window; an invoice paid before its anchor is not "still unpaid" and is left out.
SELECT stage, grp, COUNT(*) AS unpaid, SUM(undated) AS undated,
       SUM(CASE WHEN undated = 0 AND age > 3 AND (fr IS NULL OR fr > 3 OR fr > d) THEN 1 ELSE 0 END) AS eligible_3,
       SUM(CASE WHEN undated = 0 AND age > 3 AND (fr IS NULL OR fr > 3 OR fr > d) AND d <= 3 THEN 1 ELSE 0 END) AS paid_3,
       SUM(CASE WHEN undated = 0 AND age > 7 AND (fr IS NULL OR fr > 7 OR fr > d) THEN 1 ELSE 0 END) AS eligible_7,
       SUM(CASE WHEN undated = 0 AND age > 7 AND (fr IS NULL OR fr > 7 OR fr > d) AND d <= 7 THEN 1 ELSE 0 END) AS paid_7,
       SUM(CASE WHEN undated = 0 AND age > 14 AND (fr IS NULL OR fr > 14 OR fr > d) THEN 1 ELSE 0 END) AS eligible_14,
       SUM(CASE WHEN undated = 0 AND age > 14 AND (fr IS NULL OR fr > 14 OR fr > d) AND d <= 14 THEN 1 ELSE 0 END) AS paid_14
FROM (
    SELECT r.stage, 'reminded' AS grp, CAST(julianday(:as_of) - julianday(r.business_date) AS INTEGER) AS age,
           CASE WHEN i.status = 'paid' THEN CAST(julianday(i.paid_on) - julianday(r.business_date) AS INTEGER) END AS d,
           CASE WHEN i.status = 'paid' AND i.paid_on IS NULL THEN 1 ELSE 0 END AS undated, NULL AS fr
    FROM reminders r JOIN invoices i ON i.id = r.invoice_id
    WHERE r.state = 'sent' AND i.status <> 'void' AND r.business_date BETWEEN :start AND :end
      AND NOT (i.status = 'paid' AND i.paid_on IS NOT NULL AND i.paid_on < r.business_date)
      AND (:currency IS NULL OR i.currency = :currency)
    UNION ALL
    SELECT stage, 'baseline', age, d, undated, fr FROM (
        SELECT s.stage, CAST(julianday(:as_of) - julianday(i.due_on) - s.stage AS INTEGER) AS age,
               CASE WHEN i.status = 'paid' THEN CAST(julianday(i.paid_on) - julianday(i.due_on) - s.stage AS INTEGER) END AS d,
               CASE WHEN i.status = 'paid' AND i.paid_on IS NULL THEN 1 ELSE 0 END AS undated,
               CAST(julianday(f.first_sent) - julianday(i.due_on) - s.stage AS INTEGER) AS fr
        FROM (SELECT DISTINCT stage FROM reminders WHERE state = 'sent') AS s
        CROSS JOIN invoices i
        LEFT JOIN (SELECT invoice_id, MIN(business_date) AS first_sent FROM reminders WHERE state = 'sent'
                   GROUP BY invoice_id) AS f ON f.invoice_id = i.id
        WHERE date(i.due_on, s.stage || ' days') BETWEEN :start AND :end
          AND i.status <> 'void' AND (:currency IS NULL OR i.currency = :currency)
          AND NOT (i.status = 'paid' AND i.paid_on IS NOT NULL AND i.paid_on < date(i.due_on, s.stage || ' days'))
    ) AS candidates
    WHERE fr IS NULL OR fr > 0
) AS anchored
GROUP BY stage, grp
ORDER BY stage, grp;

-- name: report_promises
-- Promises to pay (holds with reason promise), per (currency, month of promise_until, outcome). A hold on an
-- invoice covers that invoice; a hold on a customer covers the customer's invoices issued on or before the hold's
-- date (the UTC date of created_at) and not paid before it. Per (hold, currency): kept when every covered invoice
-- was paid on or before promise_until; unknown when one is paid without a date; pending when promise_until is on
-- or after :as_of (the promise still runs); broken otherwise. Void invoices are left out.
WITH holds AS (
    SELECT id, invoice_id, customer_id, promise_until, substr(created_at, 1, 10) AS held_on
    FROM reminder_holds WHERE reason = 'promise' AND promise_until BETWEEN :start AND :end
), covered AS (
    SELECT h.id AS hold_id, h.promise_until, i.currency, i.amount_due, i.status, i.paid_on
    FROM holds h JOIN invoices i ON i.id = h.invoice_id
    UNION ALL
    SELECT h.id, h.promise_until, i.currency, i.amount_due, i.status, i.paid_on
    FROM holds h JOIN invoices i ON i.customer_id = h.customer_id
    WHERE h.invoice_id IS NULL AND i.issued_on <= h.held_on AND NOT (i.status = 'paid' AND i.paid_on IS NOT NULL AND i.paid_on < h.held_on)
), per_hold AS (
    SELECT hold_id, currency, promise_until,
           CASE WHEN SUM(CASE WHEN status = 'paid' AND paid_on <= promise_until THEN 1 ELSE 0 END) = COUNT(*)
                THEN 'kept'
                WHEN SUM(CASE WHEN status = 'paid' AND paid_on IS NULL THEN 1 ELSE 0 END) > 0 THEN 'unknown'
                WHEN promise_until >= :as_of THEN 'pending' ELSE 'broken' END AS outcome,
           SUM(amount_due) AS amount,
           SUM(CASE WHEN status = 'paid' AND paid_on <= promise_until THEN amount_due ELSE 0 END) AS amount_kept
    FROM covered WHERE status <> 'void' AND (:currency IS NULL OR currency = :currency)
    GROUP BY hold_id, currency, promise_until
)
SELECT currency, substr(promise_until, 1, 7) AS month, outcome, COUNT(*) AS promises, SUM(amount) AS amount,
       SUM(amount_kept) AS amount_kept
FROM per_hold
GROUP BY currency, substr(promise_until, 1, 7), outcome
ORDER BY currency, month, outcome;

-- name: report_disputes
-- Disputes (holds with reason dispute) per (currency, month opened: the UTC date of created_at): how many, how
-- many released (resolved), and what became of the disputed amounts: paid, voided, still unpaid (open or
-- uncollectible). A customer-wide dispute covers the customer's invoices as in report_promises.
WITH holds AS (
    SELECT id, invoice_id, customer_id, substr(created_at, 1, 10) AS held_on,
           CASE WHEN released_at IS NULL THEN 0 ELSE 1 END AS released
    FROM reminder_holds WHERE reason = 'dispute' AND substr(created_at, 1, 10) BETWEEN :start AND :end
), covered AS (
    SELECT h.id AS hold_id, h.held_on, h.released, i.currency, i.amount_due, i.status
    FROM holds h JOIN invoices i ON i.id = h.invoice_id
    UNION ALL
    SELECT h.id, h.held_on, h.released, i.currency, i.amount_due, i.status
    FROM holds h JOIN invoices i ON i.customer_id = h.customer_id
    WHERE h.invoice_id IS NULL AND i.issued_on <= h.held_on AND NOT (i.status = 'paid' AND i.paid_on IS NOT NULL AND i.paid_on < h.held_on)
), per_hold AS (
    SELECT hold_id, currency, held_on, released, SUM(amount_due) AS amount,
           SUM(CASE WHEN status = 'paid' THEN amount_due ELSE 0 END) AS amount_paid,
           SUM(CASE WHEN status = 'void' THEN amount_due ELSE 0 END) AS amount_void
    FROM covered WHERE :currency IS NULL OR currency = :currency
    GROUP BY hold_id, currency, held_on, released
)
SELECT currency, substr(held_on, 1, 7) AS month, COUNT(*) AS disputes, SUM(released) AS released,
       SUM(amount) AS amount, SUM(amount_paid) AS amount_paid, SUM(amount_void) AS amount_void,
       SUM(amount - amount_paid - amount_void) AS amount_unpaid
FROM per_hold
GROUP BY currency, substr(held_on, 1, 7)
ORDER BY currency, month;
