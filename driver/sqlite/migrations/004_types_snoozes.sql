-- keel schema v4 for SQLite: declared task type defaults, and a snooze
-- counter per task.
--
-- keel_types holds the defaults a type was registered with (keel.Handle or
-- keel.Declare options), so every client enqueuing the type applies them.
-- A NULL queue or priority and a 0 elsewhere mean "not set"; durations are
-- milliseconds, updated_at Unix microseconds.
CREATE TABLE keel_types (
    name            TEXT    PRIMARY KEY,
    queue           TEXT,
    priority        INTEGER,
    max_attempts    INTEGER NOT NULL DEFAULT 0,
    timeout_ms      INTEGER NOT NULL DEFAULT 0,
    backoff_base_ms INTEGER NOT NULL DEFAULT 0,
    backoff_max_ms  INTEGER NOT NULL DEFAULT 0,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

-- Snoozes since the task was enqueued or requeued; bounded by MaxSnoozes.
-- SQLite adds a column with a constant default by changing the schema
-- only: existing rows are not rewritten.
ALTER TABLE keel_tasks ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
