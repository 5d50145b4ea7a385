-- engine 0010: idempotency keys of the HTTP API's writes (issue 25 item 2). One row per (client, key): the
-- request's fingerprint (a digest of method, path and body) and the answer given, written in the transaction of
-- the write itself, so a retried request is answered from here and applied once, even after a crash between
-- the write and the answer. Rows live at least 24 hours (oncebeat.idempotency.RETENTION); older ones are pruned.
CREATE TABLE idempotency_keys (
    client       TEXT NOT NULL,
    key          TEXT NOT NULL,
    method       TEXT NOT NULL,
    path         TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    status       INTEGER NOT NULL,
    response     TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (client, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
