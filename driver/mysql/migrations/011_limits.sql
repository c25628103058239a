-- Cluster-wide limits: a queue's or type's concurrency setting now caps its
-- running tasks across every node; rate (tasks per second, 0: none) and
-- burst (0: max(1, ceil(rate))) add a token bucket, whose state (tokens and
-- tokens_at in Unix microseconds, NULL: a full bucket) a limited claim
-- refills and spends while it holds the setting's row. A limited claim
-- counts running tasks through keel_tasks_lease (state first).
ALTER TABLE keel_settings ADD COLUMN rate DOUBLE NOT NULL DEFAULT 0,
    ADD COLUMN burst INT NOT NULL DEFAULT 0,
    ADD COLUMN tokens DOUBLE NOT NULL DEFAULT 0,
    ADD COLUMN tokens_at BIGINT NULL;
