-- keel schema v6 for PostgreSQL: declared task type defaults, and a snooze
-- counter per task.
--
-- keel_types holds the defaults a type was registered with (keel.Handle or
-- keel.Declare options), so every client enqueuing the type applies them.
-- A NULL queue or priority and a 0 elsewhere mean "not set"; durations are
-- milliseconds. Names sort byte-wise (COLLATE "C") like on the other
-- databases.
CREATE TABLE {schema}.keel_types (
    name            text COLLATE "C" PRIMARY KEY,
    queue           text,
    priority        integer,
    max_attempts    integer     NOT NULL DEFAULT 0,
    timeout_ms      bigint      NOT NULL DEFAULT 0,
    backoff_base_ms bigint      NOT NULL DEFAULT 0,
    backoff_max_ms  bigint      NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL
);

-- Snoozes since the task was enqueued or requeued; bounded by MaxSnoozes.
-- A constant default makes this a catalog change only (PostgreSQL 11+):
-- no table rewrite, a brief ACCESS EXCLUSIVE lock whatever the table size.
ALTER TABLE {schema}.keel_tasks ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
