-- name: report_run_snapshot_instant
-- The first statement of a run's read transaction: reading a table (report_runs) fixes the WAL snapshot every later
-- statement reads; 'now' is the clock when this statement runs (SQLite's clock is the host's).
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS at, (SELECT COUNT(*) FROM report_runs WHERE id = 0) AS touched;
