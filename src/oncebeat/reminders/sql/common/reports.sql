-- Collection reports: the queries written the same on both backends (the dialect files hold the rest).

-- name: receivable_moves_last
-- The last row of receivable_moves (reminders 0023): compact_receivable_moves folds the rows up to it.
SELECT MAX(id) AS id FROM receivable_moves;

-- name: receivable_moves_drop
-- After SQLite's receivable_moves_fold: the rows it summed (PostgreSQL's fold deletes them itself).
DELETE FROM receivable_moves WHERE id <= :upto;
