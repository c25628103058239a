-- keel schema for SQLite: the backlog's peak per minute (driver.BacklogStore).
--
-- The leader samples the pending tasks every few seconds and keeps the
-- largest count seen in each minute (Unix seconds / 60), for as long as
-- the history's minutes.
CREATE TABLE keel_backlog (
    minute  INTEGER NOT NULL PRIMARY KEY,
    pending INTEGER NOT NULL
) WITHOUT ROWID;
