-- The oncebeat.dbtime queries in PostgreSQL's dialect: none has a form common to both backends.

-- name: database_now
-- The server's clock, read afresh (clock_timestamp(), not the transaction's now()).
SELECT clock_timestamp() AS now;
