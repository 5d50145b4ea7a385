-- engine 0001: engine tables: schedules, occurrence ledger, jobs, effects, processes, audit events.
-- Instants are TIMESTAMPTZ text in UTC ("2026-03-08T14:00:00.000000Z"): fixed width, so text order is time order.

CREATE TABLE schedules (
    key             TEXT PRIMARY KEY,
    expression      TEXT NOT NULL,
    tz              TEXT NOT NULL,
    dst_gap         TEXT NOT NULL DEFAULT 'shift',
    dst_fold        TEXT NOT NULL DEFAULT 'first',
    catchup         TEXT NOT NULL DEFAULT 'latest' CHECK (catchup IN ('none', 'latest', 'all')),
    catchup_window  REAL NOT NULL DEFAULT 86400,
    task            TEXT NOT NULL,
    args            JSON NOT NULL DEFAULT '{}',
    queue           TEXT NOT NULL DEFAULT 'default',
    definition_hash TEXT NOT NULL,
    version         INTEGER NOT NULL DEFAULT 1,
    state           TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'retired')),
    active_since    TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

-- Each distinct set of schedule definitions a clock brought, and when it was first seen.
-- A clock whose set is older than the newest one is stale (an old version still running):
-- it changes no definitions and fires only schedules whose definition it shares.
CREATE TABLE schedule_sets (
    hash           TEXT PRIMARY KEY,
    keys           JSON NOT NULL,
    first_seen_at  TIMESTAMPTZ NOT NULL,
    source_host    TEXT NOT NULL,
    source_name    TEXT NOT NULL,
    source_version TEXT NOT NULL
);

CREATE TABLE occurrences (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_key    TEXT NOT NULL,
    fire_at         TIMESTAMPTZ NOT NULL,
    local_fire_at   TEXT NOT NULL,
    tz              TEXT NOT NULL,
    business_date   DATE NOT NULL,
    tzdata_version  TEXT,
    outcome         TEXT NOT NULL CHECK (outcome IN ('enqueued', 'missed', 'coalesced', 'paused', 'manual', 'backfilled')),
    job_id          INTEGER,
    source_kind     TEXT NOT NULL,
    source_host     TEXT NOT NULL,
    source_pid      INTEGER NOT NULL,
    source_name     TEXT NOT NULL,
    source_version  TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (schedule_key, fire_at)
);
CREATE INDEX occurrences_created_at ON occurrences (created_at);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT NOT NULL DEFAULT 'default',
    task             TEXT NOT NULL,
    args             JSON NOT NULL DEFAULT '{}',
    state            TEXT NOT NULL CHECK (state IN ('available', 'scheduled', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 20,
    run_at           TIMESTAMPTZ NOT NULL,
    lease_expires_at TIMESTAMPTZ,
    worker_id        INTEGER,
    unique_key       TEXT,
    occurrence_id    INTEGER,
    source_kind      TEXT NOT NULL,
    source_host      TEXT NOT NULL,
    source_pid       INTEGER NOT NULL,
    source_name      TEXT NOT NULL,
    source_version   TEXT NOT NULL,
    errors           JSON NOT NULL DEFAULT '[]',
    created_at       TIMESTAMPTZ NOT NULL,
    started_at       TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ
);
-- The database, not code, stops a second unfinished job with the same key.
CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'scheduled', 'running', 'retryable');
-- Claim path: the plan must walk this index in order, whatever the statistics say.
CREATE INDEX jobs_fetch ON jobs (queue, priority, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_occurrence ON jobs (occurrence_id) WHERE occurrence_id IS NOT NULL;

CREATE TABLE effects (
    key            TEXT PRIMARY KEY,
    state          TEXT NOT NULL CHECK (state IN ('started', 'done', 'in_doubt', 'failed')),
    payload_hash   TEXT NOT NULL,
    job_id         INTEGER,
    attempt        INTEGER,
    process_id     INTEGER,
    source_kind    TEXT NOT NULL,
    source_host    TEXT NOT NULL,
    source_pid     INTEGER NOT NULL,
    source_name    TEXT NOT NULL,
    source_version TEXT NOT NULL,
    result         JSON,
    detail         TEXT,
    started_at     TIMESTAMPTZ NOT NULL,
    finished_at    TIMESTAMPTZ
);
CREATE INDEX effects_state ON effects (state) WHERE state <> 'done';

CREATE TABLE processes (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    role         TEXT NOT NULL,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    name         TEXT NOT NULL,
    version      TEXT NOT NULL,
    tz_env       TEXT,
    info         JSON NOT NULL DEFAULT '{}',
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    stopped_at   TIMESTAMPTZ
);

CREATE TABLE events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    at             TIMESTAMPTZ NOT NULL,
    kind           TEXT NOT NULL,
    subject        TEXT NOT NULL,
    process_id     INTEGER,
    source_kind    TEXT NOT NULL,
    source_host    TEXT NOT NULL,
    source_pid     INTEGER NOT NULL,
    source_name    TEXT NOT NULL,
    source_version TEXT NOT NULL,
    detail         JSON NOT NULL DEFAULT '{}'
);
CREATE INDEX events_subject ON events (subject, id);
CREATE INDEX events_at ON events (at);
