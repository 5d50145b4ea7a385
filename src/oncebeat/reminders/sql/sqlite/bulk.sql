-- The staging tables' DDL on SQLite: temporary tables (schema temp, this connection only; SQLite keeps them on
-- disk beside the database's temporary files, not in memory). Dropped before the import commits.

-- name: bulk_drop_rows
DROP TABLE IF EXISTS temp.oncebeat_import_rows;

-- name: bulk_drop_problems
DROP TABLE IF EXISTS temp.oncebeat_import_problems;

-- name: bulk_create_rows
CREATE TEMP TABLE oncebeat_import_rows (
    line INTEGER PRIMARY KEY, bad INTEGER NOT NULL, number TEXT, email TEXT, name TEXT, x_locale TEXT, x_tz TEXT,
    currency TEXT, amount_due INTEGER, issued_on DATE, due_on DATE, status TEXT, paid_on DATE, status_on DATE,
    paid_at TIMESTAMPTZ, hold_reason TEXT, promise_until DATE, hold_note TEXT,
    x_payment_url TEXT, x_pdf_path TEXT, x_country TEXT, x_tags TEXT
);

-- name: bulk_create_problems
CREATE TEMP TABLE oncebeat_import_problems (
    seq INTEGER PRIMARY KEY, line INTEGER NOT NULL, text TEXT NOT NULL
);

-- name: bulk_index_problems
CREATE INDEX temp.oncebeat_import_problems_line ON oncebeat_import_problems (line, seq);
