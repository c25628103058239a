-- keel schema v7 for PostgreSQL: live counters and per-minute history (see
-- driver.CountRow and driver.MinuteRow), kept by statement-level triggers
-- on keel_tasks, so every write (the engine's, an operator's, a manual
-- UPDATE) counts itself in its own transaction, once per statement.
--
-- kind is the state, with pending split into pending (never attempted) and
-- retrying; priority and due (the minute of run_at) are kept for pending
-- and retrying rows only, 0 otherwise. Each connection adds to its own
-- rows (shard = its backend pid; a backend runs one transaction at a
-- time), so no two transactions ever wait for the same counter row and
-- none can deadlock over them; readers sum the shards and the leader folds
-- them into shard 0, skipping rows a writer holds (Driver.Reconcile).
CREATE TABLE {schema}.keel_counts (
    queue    text COLLATE "C" NOT NULL,
    type     text COLLATE "C" NOT NULL,
    kind     text COLLATE "C" NOT NULL,
    priority integer NOT NULL,
    due      bigint  NOT NULL,
    shard    integer NOT NULL,
    n        bigint  NOT NULL,
    PRIMARY KEY (queue, type, kind, priority, due, shard)
);

-- One row per minute (Unix seconds / 60), queue, type and shard.
CREATE TABLE {schema}.keel_minutes (
    minute      bigint NOT NULL,
    queue       text COLLATE "C" NOT NULL,
    type        text COLLATE "C" NOT NULL,
    shard       integer NOT NULL,
    enqueued    bigint NOT NULL DEFAULT 0,
    hits        bigint NOT NULL DEFAULT 0,
    attempts    bigint NOT NULL DEFAULT 0,
    ended       bigint NOT NULL DEFAULT 0,
    failed      bigint NOT NULL DEFAULT 0,
    succeeded   bigint NOT NULL DEFAULT 0,
    dead        bigint NOT NULL DEFAULT 0,
    cancelled   bigint NOT NULL DEFAULT 0,
    duration_ms bigint NOT NULL DEFAULT 0,
    first_ms    bigint NOT NULL DEFAULT 0,
    last_ms     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, type, shard)
);

-- A row's counter key: kind (retrying for pending rows with attempt > 0),
-- and for pending rows priority and due, the minute of run_at (exact: the
-- Unix microseconds, exact in float8 for any run_at keel accepts,
-- divided by 60,000,000). The expressions are written out in each
-- statement: called through SQL functions they were not inlined, and cost
-- three times as much.
-- keel_count_add adds the deltas of one statement, in key order (the
-- order every writer locks counter rows in, so none waits in a cycle).
CREATE FUNCTION {schema}.keel_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
    SELECT n.queue, n.type, CASE WHEN n.state = 'pending' AND n.attempt > 0 THEN 'retrying' ELSE n.state END,
        CASE WHEN n.state = 'pending' THEN n.priority ELSE 0 END, CASE WHEN n.state = 'pending' THEN round(date_part('epoch', n.run_at) * 1000000)::bigint / 60000000 ELSE 0 END,
        pg_backend_pid(), count(*)
    FROM new_rows n GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n;
    INSERT INTO {schema}.keel_minutes AS m (minute, queue, type, shard, enqueued)
    SELECT round(date_part('epoch', n.created_at) * 1000000)::bigint / 60000000, n.queue, n.type, pg_backend_pid(), count(*)
    FROM new_rows n GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (minute, queue, type, shard) DO UPDATE SET enqueued = m.enqueued + excluded.enqueued;
    RETURN NULL;
END $$;

CREATE FUNCTION {schema}.keel_counted_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
    SELECT o.queue, o.type, CASE WHEN o.state = 'pending' AND o.attempt > 0 THEN 'retrying' ELSE o.state END,
        CASE WHEN o.state = 'pending' THEN o.priority ELSE 0 END, CASE WHEN o.state = 'pending' THEN round(date_part('epoch', o.run_at) * 1000000)::bigint / 60000000 ELSE 0 END,
        pg_backend_pid(), -count(*)
    FROM old_rows o GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END $$;

-- An update is counted from each row's old and new versions: the counter
-- keys they left and entered, and in the minute of the write (the new
-- updated_at) claims, ended attempts (out of running without the attempt
-- given back), their failures (a new error entry), run time and first and
-- last end, and entries into succeeded, dead and cancelled. A statement
-- that changes no key and ends nothing (a heartbeat) writes nothing.
CREATE FUNCTION {schema}.keel_counted_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
    SELECT queue, type, kind, priority, due, pg_backend_pid(), sum(d) FROM (
        SELECT o.queue, o.type, CASE WHEN o.state = 'pending' AND o.attempt > 0 THEN 'retrying' ELSE o.state END AS kind,
            CASE WHEN o.state = 'pending' THEN o.priority ELSE 0 END AS priority,
            CASE WHEN o.state = 'pending' THEN round(date_part('epoch', o.run_at) * 1000000)::bigint / 60000000 ELSE 0 END AS due, -1 AS d
        FROM old_rows o
        UNION ALL
        SELECT n.queue, n.type, CASE WHEN n.state = 'pending' AND n.attempt > 0 THEN 'retrying' ELSE n.state END,
            CASE WHEN n.state = 'pending' THEN n.priority ELSE 0 END, CASE WHEN n.state = 'pending' THEN round(date_part('epoch', n.run_at) * 1000000)::bigint / 60000000 ELSE 0 END, 1
        FROM new_rows n) x
    GROUP BY queue, type, kind, priority, due HAVING sum(d) <> 0
    ORDER BY queue, type, kind, priority, due
    ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n;

    -- Old and new versions are paired by id with an aggregate, not a join:
    -- plpgsql plans the statement once per session, on the size of the
    -- first statement's transition tables, and a join planned for one row
    -- turned into a nested loop over hundreds (a bench ran at a third of
    -- its speed in one session out of two).
    INSERT INTO {schema}.keel_minutes AS m (minute, queue, type, shard, attempts, ended, failed, succeeded, dead,
        cancelled, duration_ms, first_ms, last_ms)
    SELECT n_us / 60000000, queue, type, pg_backend_pid(),
        count(*) FILTER (WHERE o_state = 'pending' AND n_state = 'running'),
        count(*) FILTER (WHERE ended),
        count(*) FILTER (WHERE ended AND n_state IN ('pending', 'dead') AND n_err IS DISTINCT FROM o_err),
        count(*) FILTER (WHERE n_state = 'succeeded'),
        count(*) FILTER (WHERE n_state = 'dead'),
        count(*) FILTER (WHERE n_state = 'cancelled'),
        coalesce(sum((n_us - o_attempted_us) / 1000) FILTER (WHERE ended), 0),
        coalesce(min(n_us / 1000) FILTER (WHERE ended), 0), coalesce(max(n_us / 1000) FILTER (WHERE ended), 0)
    FROM (
        SELECT *, o_state = 'running' AND n_attempt = o_attempt AS ended
        FROM (
            SELECT id, max(queue) FILTER (WHERE side = 1) AS queue, max(type) FILTER (WHERE side = 1) AS type,
                max(state) FILTER (WHERE side = 0) AS o_state, max(state) FILTER (WHERE side = 1) AS n_state,
                max(attempt) FILTER (WHERE side = 0) AS o_attempt, max(attempt) FILTER (WHERE side = 1) AS n_attempt,
                max(at_us) FILTER (WHERE side = 0) AS o_attempted_us, max(at_us) FILTER (WHERE side = 1) AS n_us,
                max(last_err) FILTER (WHERE side = 0) AS o_err, max(last_err) FILTER (WHERE side = 1) AS n_err
            FROM (
                -- The last error entry is read only where one can have
                -- been appended: leaving running, for pending or dead.
                SELECT 0 AS side, o.id, o.queue, o.type, o.state, o.attempt,
                    round(date_part('epoch', o.attempted_at) * 1000000)::bigint AS at_us,
                    CASE WHEN o.state = 'running' THEN (o.errors -> -1)::text END AS last_err
                FROM old_rows o
                UNION ALL
                SELECT 1, n.id, n.queue, n.type, n.state, n.attempt,
                    round(date_part('epoch', n.updated_at) * 1000000)::bigint,
                    CASE WHEN n.state IN ('pending', 'dead') THEN (n.errors -> -1)::text END
                FROM new_rows n) u
            GROUP BY id) p
        WHERE n_state <> o_state) x
    WHERE (o_state = 'pending' AND n_state = 'running') OR ended OR n_state IN ('succeeded', 'dead', 'cancelled')
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (minute, queue, type, shard) DO UPDATE SET attempts = m.attempts + excluded.attempts,
        ended = m.ended + excluded.ended, failed = m.failed + excluded.failed,
        succeeded = m.succeeded + excluded.succeeded, dead = m.dead + excluded.dead,
        cancelled = m.cancelled + excluded.cancelled, duration_ms = m.duration_ms + excluded.duration_ms,
        first_ms = CASE WHEN m.first_ms = 0 OR (excluded.first_ms <> 0 AND excluded.first_ms < m.first_ms)
            THEN excluded.first_ms ELSE m.first_ms END,
        last_ms = greatest(m.last_ms, excluded.last_ms);
    RETURN NULL;
END $$;

CREATE TRIGGER keel_counted_insert AFTER INSERT ON {schema}.keel_tasks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {schema}.keel_counted_insert();
CREATE TRIGGER keel_counted_update AFTER UPDATE ON {schema}.keel_tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {schema}.keel_counted_update();
CREATE TRIGGER keel_counted_delete AFTER DELETE ON {schema}.keel_tasks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {schema}.keel_counted_delete();

-- The tasks already there.
INSERT INTO {schema}.keel_counts (queue, type, kind, priority, due, shard, n)
SELECT queue, type, CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END,
    CASE WHEN state = 'pending' THEN priority ELSE 0 END,
    CASE WHEN state = 'pending' THEN round(date_part('epoch', run_at) * 1000000)::bigint / 60000000 ELSE 0 END, 0, count(*)
FROM {schema}.keel_tasks GROUP BY 1, 2, 3, 4, 5;

-- The workers each node runs per queue (a JSON object), for the ETA of a
-- client that runs none itself.
ALTER TABLE {schema}.keel_nodes ADD COLUMN workers text NOT NULL DEFAULT '{}';
