-- keel schema for MySQL / MariaDB: sequences (driver.Sequencer).
--
-- Tasks enqueued with the same sequence key run one at a time, in enqueue
-- order. keel_sequences holds one row per key: enqueues and releases of a
-- key lock it first, so they happen one after another. A key's members
-- still to run (and a dead member that holds the key) are listed in
-- keel_sequence_members, by id: the first is the one that may run, every
-- later one is held (run_at at driver.HeldUntil) until the one before it
-- finished. Tasks without a key never touch either table, and keel_tasks
-- gets no index for them.
CREATE TABLE keel_sequences (
    seq_key    VARCHAR(255) NOT NULL PRIMARY KEY,
    skip_dead  BOOLEAN      NOT NULL DEFAULT FALSE, -- a dead member lets the rest go on
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE keel_sequence_members (
    seq_key VARCHAR(255) NOT NULL,
    task_id BIGINT       NOT NULL,
    PRIMARY KEY (seq_key, task_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

ALTER TABLE keel_tasks ADD COLUMN seq_key VARCHAR(255) NULL;
ALTER TABLE keel_archive ADD COLUMN seq_key VARCHAR(255) NULL;
