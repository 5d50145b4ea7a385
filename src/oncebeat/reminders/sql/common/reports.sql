-- Collection reports: the queries written the same on both backends (the dialect files hold the rest).

-- name: receivable_moves_last
-- The last row of receivable_moves (reminders 0023): compact_receivable_moves folds the rows up to it.
SELECT MAX(id) AS id FROM receivable_moves;

-- name: receivable_moves_drop
-- After SQLite's receivable_moves_fold: the rows it summed (PostgreSQL's fold deletes them itself).
DELETE FROM receivable_moves WHERE id <= :upto;

-- name: stage_outcomes_last
-- The last row of stage_outcomes (reminders 0025): compact_stage_outcomes folds the rows up to it.
SELECT MAX(id) AS id FROM stage_outcomes;

-- name: stage_outcomes_drop
-- After SQLite's stage_outcomes_fold: the rows it summed (PostgreSQL's fold deletes them itself).
DELETE FROM stage_outcomes WHERE id <= :upto;

-- name: stage_outcomes_untracked
-- Stages with a sent reminder whose baseline rows stage_outcomes does not keep yet (track_stage_outcomes adds
-- them): while there is one, stage_effectiveness reads the reference query.
SELECT stage FROM stage_outcomes WHERE grp = 'sent' GROUP BY stage HAVING SUM(n) > 0
EXCEPT SELECT stage FROM stage_outcome_stages
ORDER BY stage;

-- name: stage_outcome_stage_add
INSERT INTO stage_outcome_stages (stage) VALUES (:stage);
