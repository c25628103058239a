-- keel schema v6 for MySQL / MariaDB: the archive. The leader moves
-- succeeded, cancelled and dead tasks past their retention from keel_tasks
-- to keel_archive (Driver.Archive) in small batches, so the task table
-- does not grow without bound; Get still finds them by id. Rows keep their
-- id (AUTO_INCREMENT never hands an id out again: the counter is persisted
-- by MySQL 8 and MariaDB 10.2.4+) and every column but the generated ones;
-- archived_at is when they moved. No idempotency index: an archived task
-- no longer holds its key. Archival finds succeeded and dead tasks on
-- keel_tasks_finished (migration 003) and cancelled ones on
-- keel_tasks_state, so keel_tasks gets no new index. The statement can
-- run again if the migration is interrupted.
CREATE TABLE IF NOT EXISTS keel_archive (
    id               BIGINT       NOT NULL PRIMARY KEY,
    queue            VARCHAR(255) NOT NULL,
    type             VARCHAR(255) NOT NULL,
    priority         INT          NOT NULL,
    payload          JSON         NOT NULL,
    state            VARCHAR(16)  NOT NULL,
    attempt          INT          NOT NULL,
    max_attempts     INT          NOT NULL,
    fence            BIGINT       NOT NULL,
    run_at           DATETIME(6)  NOT NULL,
    timeout_ms       BIGINT       NOT NULL,
    idem_key         VARCHAR(300) NULL,
    payload_digest   VARCHAR(255) NOT NULL,
    lease_owner      VARCHAR(255) NULL,
    lease_expires_at DATETIME(6)  NULL,
    created_at       DATETIME(6)  NOT NULL,
    started_at       DATETIME(6)  NULL,
    attempted_at     DATETIME(6)  NULL,
    finished_at      DATETIME(6)  NULL,
    updated_at       DATETIME(6)  NOT NULL,
    errors           JSON         NOT NULL,
    result           JSON         NULL,
    meta             JSON         NULL,
    snoozes          INT          NOT NULL,
    archived_at      DATETIME(6)  NOT NULL,
    -- PurgeArchive deletes the oldest archived rows first.
    KEY keel_archive_archived (archived_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
