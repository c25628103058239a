-- keel schema v4 for PostgreSQL: runtime settings of queues and task types
-- (changed without a restart, read by every node), and an index for
-- counting recently finished tasks. Durations are milliseconds; 0 means
-- "not set here". Names sort byte-wise (COLLATE "C") like on the other
-- databases.
CREATE TABLE {schema}.keel_settings (
    kind            text COLLATE "C" NOT NULL CHECK (kind IN ('queue', 'type')),
    name            text COLLATE "C" NOT NULL,
    paused          boolean     NOT NULL DEFAULT false,
    concurrency     integer     NOT NULL DEFAULT 0,
    timeout_ms      bigint      NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 0,
    backoff_base_ms bigint      NOT NULL DEFAULT 0,
    backoff_max_ms  bigint      NOT NULL DEFAULT 0,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (kind, name)
);

-- Throughput and dead-letter rate (CountFinished) read this index only:
-- succeeded and dead rows by finish time. Pending and running rows are not
-- in it, so the claim path does not maintain it.
CREATE INDEX keel_tasks_finished ON {schema}.keel_tasks (finished_at, queue, state)
    WHERE state IN ('succeeded', 'dead');
