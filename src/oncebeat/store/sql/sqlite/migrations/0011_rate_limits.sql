-- engine 0011: per-key rate limits enforced across every worker by the database (issue 26 item 3).
-- rate_limits: one row per key (a relay, a recipient domain, a tenant) with the limit last asked for; a take
-- writes its row inside BEGIN IMMEDIATE (the single writer), so takes of one key run one at a time.
-- rate_permits: a sliding log, one row per permit. taken_at: when it was granted; until: the latest instant the
-- permitted action can have happened — taken_at + a pessimistic hold while it is in flight, the instant it
-- ended once released. A permit counts against its key while until > now - period, so no window of `period`
-- seconds holds more than `max_count` actions, however long each one took (see oncebeat.ratelimit).
CREATE TABLE rate_limits (
    key          TEXT PRIMARY KEY,
    max_count    INTEGER NOT NULL CHECK (max_count >= 1),
    per_seconds  DOUBLE PRECISION NOT NULL CHECK (per_seconds > 0),
    updated_at   TIMESTAMPTZ NOT NULL
);
CREATE TABLE rate_permits (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    key       TEXT NOT NULL,
    taken_at  TIMESTAMPTZ NOT NULL,
    until     TIMESTAMPTZ NOT NULL,
    job_id    INTEGER
);
CREATE INDEX rate_permits_key_until ON rate_permits (key, until);
