-- keel schema for MySQL / MariaDB: batches (driver.Batcher).
--
-- A batch is a group of tasks with callbacks: on_success is enqueued when
-- every member succeeded, on_finish when every member reached a final
-- state. A member carries its batch's id; nothing counts members as they
-- finish (no row every finish would update under a lock): the leader looks
-- for a sealed batch's unfinished members through keel_tasks_batch and,
-- when there are none, finishes the batch and enqueues its callbacks in
-- one transaction. on_success and on_finish hold the callbacks as prepared
-- at creation; the counts are written when the batch finishes.
CREATE TABLE keel_batches (
    id            BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    total         BIGINT NOT NULL DEFAULT 0,
    on_success    JSON NULL,
    on_finish     JSON NULL,
    on_success_id BIGINT NULL,
    on_finish_id  BIGINT NULL,
    succeeded     BIGINT NOT NULL DEFAULT 0,
    dead          BIGINT NOT NULL DEFAULT 0,
    cancelled     BIGINT NOT NULL DEFAULT 0,
    created_at    DATETIME(6) NOT NULL,
    sealed_at     DATETIME(6) NULL,
    finished_at   DATETIME(6) NULL,
    -- The sealed batches still to finish: what the leader checks.
    unfinished    TINYINT AS (CASE WHEN finished_at IS NULL AND sealed_at IS NOT NULL THEN 1 END) STORED,
    KEY keel_batches_open (unfinished, id),
    -- The finished batches by age: the leader deletes those past retention.
    KEY keel_batches_finished (finished_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A member's state under its batch, NULL outside a batch: a transition of
-- a task outside a batch leaves the key unchanged, so it writes nothing
-- more to it.
ALTER TABLE keel_tasks
    ADD COLUMN batch_id BIGINT NULL,
    ADD COLUMN batch_state VARCHAR(16) AS (CASE WHEN batch_id IS NOT NULL THEN state END) VIRTUAL,
    ADD KEY keel_tasks_batch (batch_id, batch_state);
ALTER TABLE keel_archive
    ADD COLUMN batch_id BIGINT NULL,
    ADD KEY keel_archive_batch (batch_id, state);
