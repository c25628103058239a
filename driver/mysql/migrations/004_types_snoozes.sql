-- keel schema v4 for MySQL / MariaDB: declared task type defaults, and a
-- snooze counter per task. Each statement can run again if a later one
-- failed (the ALTER is last).
--
-- keel_types holds the defaults a type was registered with (keel.Handle or
-- keel.Declare options), so every client enqueuing the type applies them.
-- A NULL queue or priority and a 0 elsewhere mean "not set"; durations are
-- milliseconds.
CREATE TABLE IF NOT EXISTS keel_types (
    name            VARCHAR(255) NOT NULL PRIMARY KEY,
    queue           VARCHAR(255) NULL,
    priority        INT          NULL,
    max_attempts    INT          NOT NULL DEFAULT 0,
    timeout_ms      BIGINT       NOT NULL DEFAULT 0,
    backoff_base_ms BIGINT       NOT NULL DEFAULT 0,
    backoff_max_ms  BIGINT       NOT NULL DEFAULT 0,
    updated_at      DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Snoozes since the task was enqueued or requeued; bounded by MaxSnoozes.
-- ALGORITHM=INSTANT changes only metadata (MariaDB 10.3+, MySQL 8.0.12+
-- for a last column): no table copy whatever the table size. A server
-- that cannot add it instantly refuses rather than copying the table.
ALTER TABLE keel_tasks ADD COLUMN snoozes INT NOT NULL DEFAULT 0, ALGORITHM=INSTANT;
