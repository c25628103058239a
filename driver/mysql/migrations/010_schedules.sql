-- Periodic tasks: one row per schedule. last_tick is the unix second of the
-- last tick enqueued (or passed over); the leader advances it with a
-- compare-and-set in the transaction that inserts the tick's task.
CREATE TABLE IF NOT EXISTS keel_schedules (
    name       VARBINARY(128) NOT NULL PRIMARY KEY,
    spec       VARCHAR(200)   NOT NULL,
    time_zone  VARCHAR(64)    NOT NULL,
    type       VARBINARY(128) NOT NULL,
    queue      VARBINARY(128) NOT NULL,
    payload    MEDIUMTEXT     NOT NULL,
    priority   INT            NOT NULL,
    missed     VARCHAR(16)    NOT NULL,
    paused     BOOLEAN        NOT NULL DEFAULT FALSE,
    last_tick  BIGINT         NOT NULL,
    created_at DATETIME(6)    NOT NULL,
    updated_at DATETIME(6)    NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
