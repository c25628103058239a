-- keel schema for PostgreSQL: the backlog's peak per minute
-- (driver.BacklogStore).
--
-- The leader samples the pending tasks every few seconds and keeps the
-- largest count seen in each minute (Unix seconds / 60), for as long as
-- the history's minutes.
CREATE TABLE {schema}.keel_backlog (
    minute  bigint PRIMARY KEY,
    pending bigint NOT NULL
);
