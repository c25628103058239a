-- keel schema for PostgreSQL: sequences (driver.Sequencer).
--
-- Tasks enqueued with the same sequence key run one at a time, in enqueue
-- order. keel_sequences holds one row per key: enqueues and releases of a
-- key lock it first, so they happen one after another. A key's members
-- still to run (and a dead member that holds the key) are listed in
-- keel_sequence_members, by id: the first is the one that may run, every
-- later one is held (run_at at driver.HeldUntil) until the one before it
-- finished. Tasks without a key never touch either table.
CREATE TABLE {schema}.keel_sequences (
    seq_key    text        PRIMARY KEY,
    skip_dead  boolean     NOT NULL DEFAULT false, -- a dead member lets the rest go on
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE {schema}.keel_sequence_members (
    seq_key text   NOT NULL,
    task_id bigint NOT NULL,
    PRIMARY KEY (seq_key, task_id)
);

-- Nullable, no default: adding them rewrites nothing.
ALTER TABLE {schema}.keel_tasks ADD COLUMN seq_key text;
ALTER TABLE {schema}.keel_archive ADD COLUMN seq_key text;
