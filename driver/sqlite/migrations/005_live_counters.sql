-- keel schema v5 for SQLite: live counters and per-minute history, kept in
-- the transaction of every write to keel_tasks (see driver.CountRow and
-- driver.MinuteRow), so that counts, rates and the ETA never read the task
-- table.
--
-- kind is the state, with pending split into pending (never attempted) and
-- retrying; priority and due (the minute of run_at: Unix microseconds /
-- 60,000,000) are kept for pending and retrying rows only, 0 otherwise.
-- shard is always 0 here (one writer); the other drivers keep a row per
-- connection so that writers never wait for each other's counter rows.
CREATE TABLE keel_counts (
    queue    TEXT    NOT NULL,
    type     TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    priority INTEGER NOT NULL,
    due      INTEGER NOT NULL,
    shard    INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (queue, type, kind, priority, due, shard)
) WITHOUT ROWID;

INSERT INTO keel_counts (queue, type, kind, priority, due, shard, n)
SELECT queue, type, CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END,
    CASE WHEN state = 'pending' THEN priority ELSE 0 END,
    CASE WHEN state = 'pending' THEN run_at / 60000000 ELSE 0 END, 0, count(*)
FROM keel_tasks GROUP BY 1, 2, 3, 4, 5;

-- One row per minute (Unix seconds / 60), queue and type.
CREATE TABLE keel_minutes (
    minute      INTEGER NOT NULL,
    queue       TEXT    NOT NULL,
    type        TEXT    NOT NULL,
    shard       INTEGER NOT NULL,
    enqueued    INTEGER NOT NULL DEFAULT 0,
    hits        INTEGER NOT NULL DEFAULT 0,
    attempts    INTEGER NOT NULL DEFAULT 0,
    ended       INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    succeeded   INTEGER NOT NULL DEFAULT 0,
    dead        INTEGER NOT NULL DEFAULT 0,
    cancelled   INTEGER NOT NULL DEFAULT 0,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    first_ms    INTEGER NOT NULL DEFAULT 0,
    last_ms     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, type, shard)
) WITHOUT ROWID;

-- The workers each node runs per queue (a JSON object), for the ETA of a
-- client that runs none itself.
ALTER TABLE keel_nodes ADD COLUMN workers TEXT NOT NULL DEFAULT '{}';
