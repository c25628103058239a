-- keel schema v3 for SQLite: runtime settings of queues and task types
-- (changed without a restart, read by every node), and an index for
-- counting recently finished tasks. Times are Unix microseconds; durations
-- milliseconds; 0 means "not set here".
CREATE TABLE keel_settings (
    kind            TEXT    NOT NULL CHECK (kind IN ('queue', 'type')),
    name            TEXT    NOT NULL,
    paused          INTEGER NOT NULL DEFAULT 0,
    concurrency     INTEGER NOT NULL DEFAULT 0,
    timeout_ms      INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 0,
    backoff_base_ms INTEGER NOT NULL DEFAULT 0,
    backoff_max_ms  INTEGER NOT NULL DEFAULT 0,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
) WITHOUT ROWID;

-- Throughput and dead-letter rate (CountFinished) read this index only:
-- succeeded and dead rows by finish time. Pending and running rows are not
-- in it, so the claim path does not maintain it.
CREATE INDEX keel_tasks_finished ON keel_tasks (finished_at, queue, state)
    WHERE state IN ('succeeded', 'dead');
