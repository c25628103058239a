-- keel schema v3 for MySQL / MariaDB: runtime settings of queues and task
-- types (changed without a restart, read by every node), and an index for
-- counting recently finished tasks. Durations are milliseconds; 0 means
-- "not set here". Each statement can run again if a later one failed.
CREATE TABLE IF NOT EXISTS keel_settings (
    kind            VARCHAR(16)  NOT NULL,
    name            VARCHAR(255) NOT NULL,
    paused          BOOLEAN      NOT NULL DEFAULT FALSE,
    concurrency     INT          NOT NULL DEFAULT 0,
    timeout_ms      BIGINT       NOT NULL DEFAULT 0,
    max_attempts    INT          NOT NULL DEFAULT 0,
    backoff_base_ms BIGINT       NOT NULL DEFAULT 0,
    backoff_max_ms  BIGINT       NOT NULL DEFAULT 0,
    updated_at      DATETIME(6)  NOT NULL,
    PRIMARY KEY (kind, name),
    CONSTRAINT keel_settings_kind CHECK (kind IN ('queue', 'type'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- No partial indexes: finished_state is the state of succeeded and dead
-- rows and NULL for the others, so its index covers CountFinished and a
-- claim (pending to running: NULL stays NULL) does not touch it. Adding a
-- stored column rebuilds the table once.
ALTER TABLE keel_tasks
    ADD COLUMN finished_state VARCHAR(16) AS (CASE WHEN state IN ('succeeded', 'dead') THEN state END) STORED,
    ADD KEY keel_tasks_finished (finished_state, finished_at, queue);
