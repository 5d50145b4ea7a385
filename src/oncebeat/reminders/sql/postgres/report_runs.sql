-- name: report_run_snapshot_instant
-- The first statement of a run's REPEATABLE READ transaction: it takes the snapshot every later statement reads,
-- and its start (statement_timestamp, the database clock) is the run's as-of instant: every transaction committed
-- before it is in the snapshot (one committing in the microseconds between this statement's start and the
-- snapshot may be too; none committed later is).
SELECT statement_timestamp() AS at;
