-- keel schema v5 for MySQL 8 / MariaDB 10.6+: live counters and per-minute
-- history, kept in the transaction of every write to keel_tasks (see
-- driver.CountRow and driver.MinuteRow), so that counts, rates and the ETA
-- never read the task table.
--
-- kind is the state, with pending split into pending (never attempted) and
-- retrying; priority and due (the minute of run_at: Unix seconds / 60) are
-- kept for pending and retrying rows only, 0 otherwise. shard is the
-- writing connection's CONNECTION_ID(), so that concurrent writers
-- seldom wait for each other's counter rows; readers sum the shards and
-- Reconcile folds them into shard 0. due is computed with TIMESTAMPDIFF
-- from the epoch (run_at is UTC), not UNIX_TIMESTAMP, which depends on the
-- session's time zone and gives NULL after 2038 on MariaDB before 11.5.
CREATE TABLE keel_counts (
    queue    VARCHAR(255) NOT NULL,
    type     VARCHAR(255) NOT NULL,
    kind     VARCHAR(16)  NOT NULL,
    priority INT          NOT NULL,
    due      BIGINT       NOT NULL,
    shard    INT          NOT NULL,
    n        BIGINT       NOT NULL,
    PRIMARY KEY (queue, type, kind, priority, due, shard)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT INTO keel_counts (queue, type, kind, priority, due, shard, n)
SELECT queue, type, CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END,
    CASE WHEN state = 'pending' THEN priority ELSE 0 END,
    CASE WHEN state = 'pending' THEN FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', run_at) / 60000000) ELSE 0 END, 0, COUNT(*)
FROM keel_tasks GROUP BY 1, 2, 3, 4, 5;

-- One row per minute (Unix seconds / 60), queue, type and shard.
CREATE TABLE keel_minutes (
    minute      BIGINT       NOT NULL,
    queue       VARCHAR(255) NOT NULL,
    type        VARCHAR(255) NOT NULL,
    shard       INT          NOT NULL,
    enqueued    BIGINT       NOT NULL DEFAULT 0,
    hits        BIGINT       NOT NULL DEFAULT 0,
    attempts    BIGINT       NOT NULL DEFAULT 0,
    ended       BIGINT       NOT NULL DEFAULT 0,
    failed      BIGINT       NOT NULL DEFAULT 0,
    succeeded   BIGINT       NOT NULL DEFAULT 0,
    dead        BIGINT       NOT NULL DEFAULT 0,
    cancelled   BIGINT       NOT NULL DEFAULT 0,
    duration_ms BIGINT       NOT NULL DEFAULT 0,
    first_ms    BIGINT       NOT NULL DEFAULT 0,
    last_ms     BIGINT       NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, type, shard)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The workers each node runs per queue (a JSON object), for the ETA of a
-- client that runs none itself. NULL (a row of an older keel): none known.
ALTER TABLE keel_nodes ADD COLUMN workers TEXT NULL;
