-- Cluster-wide limits: a queue's or type's concurrency setting now caps its
-- running tasks across every node; rate (tasks per second, 0: none) and
-- burst (0: max(1, ceil(rate))) add a token bucket, whose state (tokens and
-- tokens_at in Unix microseconds, NULL: a full bucket) a limited claim
-- refills and spends while it holds the setting's row. A limited claim
-- counts running tasks on keel_tasks_lease (every running task has a
-- lease, and only those).
ALTER TABLE {schema}.keel_settings ADD COLUMN rate double precision NOT NULL DEFAULT 0,
    ADD COLUMN burst integer NOT NULL DEFAULT 0,
    ADD COLUMN tokens double precision NOT NULL DEFAULT 0,
    ADD COLUMN tokens_at bigint;
