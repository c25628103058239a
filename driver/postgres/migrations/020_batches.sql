-- keel schema for PostgreSQL: batches (driver.Batcher).
--
-- A batch is a group of tasks with callbacks: on_success is enqueued when
-- every member succeeded, on_finish when every member reached a final
-- state. A member carries its batch's id; nothing counts members as they
-- finish (no row every finish would update under a lock): the leader looks
-- for a sealed batch's unfinished members through keel_tasks_batch and,
-- when there are none, finishes the batch and enqueues its callbacks in
-- one transaction. on_success and on_finish hold the callbacks as prepared
-- at creation; the counts are written when the batch finishes.
CREATE TABLE {schema}.keel_batches (
    id            bigserial PRIMARY KEY,
    total         bigint NOT NULL DEFAULT 0,
    on_success    jsonb,
    on_finish     jsonb,
    on_success_id bigint,
    on_finish_id  bigint,
    succeeded     bigint NOT NULL DEFAULT 0,
    dead          bigint NOT NULL DEFAULT 0,
    cancelled     bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    sealed_at     timestamptz,
    finished_at   timestamptz
);

-- The finished batches by age: the leader deletes those past retention.
CREATE INDEX keel_batches_finished ON {schema}.keel_batches (finished_at)
    WHERE finished_at IS NOT NULL;

-- The sealed batches still to finish: what the leader checks.
CREATE INDEX keel_batches_open ON {schema}.keel_batches (id)
    WHERE finished_at IS NULL AND sealed_at IS NOT NULL;

-- Nullable, no default: adding them rewrites nothing.
ALTER TABLE {schema}.keel_tasks ADD COLUMN batch_id bigint;
ALTER TABLE {schema}.keel_archive ADD COLUMN batch_id bigint;

-- A batch's members by state; tasks outside a batch are not in it, so
-- their transitions write nothing more.
CREATE INDEX keel_tasks_batch ON {schema}.keel_tasks (batch_id, state, id)
    WHERE batch_id IS NOT NULL;
CREATE INDEX keel_archive_batch ON {schema}.keel_archive (batch_id, state)
    WHERE batch_id IS NOT NULL;
