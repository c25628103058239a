-- keel schema for SQLite: batches (driver.Batcher).
--
-- A batch is a group of tasks with callbacks: on_success is enqueued when
-- every member succeeded, on_finish when every member reached a final
-- state. A member carries its batch's id; nothing counts members as they
-- finish (no row every finish would update): the leader looks for a
-- sealed batch's unfinished members through keel_tasks_batch and, when
-- there are none, finishes the batch and enqueues its callbacks in one
-- transaction. on_success and on_finish hold the callbacks as prepared at
-- creation (JSON); the counts are written when the batch finishes.
CREATE TABLE keel_batches (
    id            INTEGER PRIMARY KEY,
    total         INTEGER NOT NULL DEFAULT 0,
    on_success    TEXT,
    on_finish     TEXT,
    on_success_id INTEGER,
    on_finish_id  INTEGER,
    succeeded     INTEGER NOT NULL DEFAULT 0,
    dead          INTEGER NOT NULL DEFAULT 0,
    cancelled     INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    sealed_at     INTEGER,
    finished_at   INTEGER
);

-- The finished batches by age: the leader deletes those past retention.
CREATE INDEX keel_batches_finished ON keel_batches (finished_at)
    WHERE finished_at IS NOT NULL;

-- The sealed batches still to finish: what the leader checks.
CREATE INDEX keel_batches_open ON keel_batches (id)
    WHERE finished_at IS NULL AND sealed_at IS NOT NULL;

ALTER TABLE keel_tasks ADD COLUMN batch_id INTEGER;
ALTER TABLE keel_archive ADD COLUMN batch_id INTEGER;

-- A batch's members by state; tasks outside a batch are not in it, so
-- their transitions write nothing more.
CREATE INDEX keel_tasks_batch ON keel_tasks (batch_id, state, id)
    WHERE batch_id IS NOT NULL;
CREATE INDEX keel_archive_batch ON keel_archive (batch_id, state)
    WHERE batch_id IS NOT NULL;
