-- keel schema v11 for MySQL / MariaDB: fallbacks when a task dies, and the
-- automatic brake. Each statement can run again if a later one failed.
--
-- keel_brakes holds each braked type's brake: closed, open (its tasks are
-- not claimed until open_until) or half_open (one probe task may run). A type
-- without a row is closed.
CREATE TABLE IF NOT EXISTS keel_brakes (
    type          VARCHAR(255) NOT NULL PRIMARY KEY,
    state         VARCHAR(16)  NOT NULL,
    opened_at     DATETIME(6)  NULL,
    open_until    DATETIME(6)  NULL,
    probe_task_id BIGINT       NULL,
    probe_owner   VARCHAR(255) NULL,
    probe_at      DATETIME(6)  NULL,
    probe_attempt INT          NOT NULL DEFAULT 0,
    ratio         DOUBLE       NOT NULL DEFAULT 0,
    attempts      INT          NOT NULL DEFAULT 0,
    reason        VARCHAR(1024) NOT NULL DEFAULT '',
    closed_at     DATETIME(6)  NULL,
    updated_at    DATETIME(6)  NOT NULL,
    -- Thresholds set at runtime (the API), over the declared ones; 0: not
    -- set, cfg_window -1: the type never brakes.
    cfg_window      INT    NOT NULL DEFAULT 0,
    cfg_threshold   DOUBLE NOT NULL DEFAULT 0,
    cfg_cooldown_ms BIGINT NOT NULL DEFAULT 0
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- keel_types gains the type's on_dead follow-up type (NULL: none), whether
-- a dead task of the type runs the library's OnDead hook, and the brake's
-- thresholds declared for the type (0: keel's default; brake_window -1:
-- the type never brakes). The ALTER is last.
ALTER TABLE keel_types ADD COLUMN on_dead VARCHAR(255) NULL,
    ADD COLUMN on_dead_hook BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN brake_window INT NOT NULL DEFAULT 0,
    ADD COLUMN brake_threshold DOUBLE NOT NULL DEFAULT 0,
    ADD COLUMN brake_cooldown_ms BIGINT NOT NULL DEFAULT 0;
