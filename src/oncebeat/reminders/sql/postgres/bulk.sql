-- The staging tables' DDL on PostgreSQL: temporary tables (schema pg_temp, this session only). The explicit
-- pg_temp never drops a table of the same name in the deployment's own schema.

-- name: bulk_drop_rows
DROP TABLE IF EXISTS pg_temp.oncebeat_import_rows;

-- name: bulk_drop_problems
DROP TABLE IF EXISTS pg_temp.oncebeat_import_problems;

-- name: bulk_create_rows
CREATE TEMP TABLE oncebeat_import_rows (
    line BIGINT PRIMARY KEY, bad BOOLEAN NOT NULL, number TEXT, email TEXT, name TEXT, x_locale TEXT, x_tz TEXT,
    currency TEXT, amount_due BIGINT, issued_on DATE, due_on DATE, status TEXT, paid_on DATE, status_on DATE,
    paid_at TIMESTAMPTZ, hold_reason TEXT, promise_until DATE, hold_note TEXT,
    x_payment_url TEXT, x_pdf_path TEXT, x_country TEXT, x_tags TEXT
) ON COMMIT DROP;

-- name: bulk_create_problems
CREATE TEMP TABLE oncebeat_import_problems (
    seq BIGINT PRIMARY KEY, line BIGINT NOT NULL, text TEXT NOT NULL
) ON COMMIT DROP;

-- name: bulk_index_problems
CREATE INDEX oncebeat_import_problems_line ON oncebeat_import_problems (line, seq);
