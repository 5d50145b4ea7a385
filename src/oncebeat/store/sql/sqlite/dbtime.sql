-- The oncebeat.dbtime queries in SQLite's dialect: none has a form common to both backends.

-- name: database_now
-- The database's own clock. SQLite has no server: this is the host clock of the calling process,
-- which is why the clock refuses time_source = database on SQLite (see oncebeat.dbtime).
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS "now [TIMESTAMPTZ]";
