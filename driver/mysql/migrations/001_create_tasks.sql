-- keel schema v1 for MySQL 8 / MariaDB 10.6+. Every statement ends with ";"
-- at the end of a line: the migrator runs them one at a time.
CREATE TABLE keel_tasks (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue            VARCHAR(255) NOT NULL,
    type             VARCHAR(255) NOT NULL,
    priority         INT          NOT NULL DEFAULT 0,
    payload          JSON         NOT NULL,
    state            VARCHAR(16)  NOT NULL,
    attempt          INT          NOT NULL DEFAULT 0,
    max_attempts     INT          NOT NULL,
    fence            BIGINT       NOT NULL DEFAULT 0, -- claims so far; never reset
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
    -- No partial indexes: the key is held (non-NULL here, so unique) while
    -- the task is pending, running or succeeded; dead and cancelled release it.
    idem_held        VARCHAR(300) AS (CASE WHEN state IN ('pending', 'running', 'succeeded') THEN idem_key END) STORED,
    UNIQUE KEY keel_tasks_idem (idem_held),
    -- The claim path: pending rows of one queue, best first.
    KEY keel_tasks_claim (state, queue, priority DESC, run_at, id),
    -- The rescuer reads running rows by lease expiry.
    KEY keel_tasks_lease (state, lease_expires_at),
    -- Listings by state (dead letters, cancelled).
    KEY keel_tasks_state (state, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE keel_leaders (
    name       VARCHAR(255) NOT NULL PRIMARY KEY,
    owner      VARCHAR(255) NOT NULL,
    expires_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
