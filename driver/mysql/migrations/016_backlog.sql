-- keel schema for MySQL / MariaDB: the backlog's peak per minute
-- (driver.BacklogStore).
--
-- The leader samples the pending tasks every few seconds and keeps the
-- largest count seen in each minute (Unix seconds / 60), for as long as
-- the history's minutes.
CREATE TABLE keel_backlog (
    minute  BIGINT NOT NULL PRIMARY KEY,
    pending BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
