-- keel schema for SQLite: sequences (driver.Sequencer).
--
-- Tasks enqueued with the same sequence key run one at a time, in enqueue
-- order. keel_sequences holds one row per key: enqueues and releases of a
-- key take it first, so they happen one after another. A key's members
-- still to run (and a dead member that holds the key) are listed in
-- keel_sequence_members, by id: the first is the one that may run, every
-- later one is held (run_at at driver.HeldUntil) until the one before it
-- finished. Tasks without a key never touch either table.
CREATE TABLE keel_sequences (
    seq_key    TEXT    PRIMARY KEY,
    skip_dead  INTEGER NOT NULL DEFAULT 0, -- 1: a dead member lets the rest go on
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE keel_sequence_members (
    seq_key TEXT    NOT NULL,
    task_id INTEGER NOT NULL,
    PRIMARY KEY (seq_key, task_id)
) WITHOUT ROWID;

ALTER TABLE keel_tasks ADD COLUMN seq_key TEXT;
ALTER TABLE keel_archive ADD COLUMN seq_key TEXT;
