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

-- keel_count_kind, keel_count_priority and keel_count_due are a row's
-- counter key.
CREATE FUNCTION {schema}.keel_count_kind(state text, attempt integer) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END $$;
CREATE FUNCTION {schema}.keel_count_priority(state text, priority integer) RETURNS integer
    LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN state = 'pending' THEN priority ELSE 0 END $$;
CREATE FUNCTION {schema}.keel_count_due(state text, run_at timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN state = 'pending' THEN floor(extract(epoch FROM run_at) / 60)::bigint ELSE 0 END $$;

-- keel_count_add adds the deltas of one statement, in key order (the
-- order every writer locks counter rows in, so none waits in a cycle).
CREATE FUNCTION {schema}.keel_counted_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
    SELECT n.queue, n.type, {schema}.keel_count_kind(n.state, n.attempt),
        {schema}.keel_count_priority(n.state, n.priority), {schema}.keel_count_due(n.state, n.run_at),
        pg_backend_pid(), count(*)
    FROM new_rows n GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
    ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n;
    INSERT INTO {schema}.keel_minutes AS m (minute, queue, type, shard, enqueued)
    SELECT floor(extract(epoch FROM n.created_at) / 60)::bigint, n.queue, n.type, pg_backend_pid(), count(*)
    FROM new_rows n GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (minute, queue, type, shard) DO UPDATE SET enqueued = m.enqueued + excluded.enqueued;
    RETURN NULL;
END $$;

CREATE FUNCTION {schema}.keel_counted_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
    SELECT o.queue, o.type, {schema}.keel_count_kind(o.state, o.attempt),
        {schema}.keel_count_priority(o.state, o.priority), {schema}.keel_count_due(o.state, o.run_at),
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
        SELECT o.queue, o.type, {schema}.keel_count_kind(o.state, o.attempt) AS kind,
            {schema}.keel_count_priority(o.state, o.priority) AS priority,
            {schema}.keel_count_due(o.state, o.run_at) AS due, -1 AS d
        FROM old_rows o
        UNION ALL
        SELECT n.queue, n.type, {schema}.keel_count_kind(n.state, n.attempt),
            {schema}.keel_count_priority(n.state, n.priority), {schema}.keel_count_due(n.state, n.run_at), 1
        FROM new_rows n) x
    GROUP BY queue, type, kind, priority, due HAVING sum(d) <> 0
    ORDER BY queue, type, kind, priority, due
    ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n;

    INSERT INTO {schema}.keel_minutes AS m (minute, queue, type, shard, attempts, ended, failed, succeeded, dead,
        cancelled, duration_ms, first_ms, last_ms)
    SELECT minute, queue, type, pg_backend_pid(), count(*) FILTER (WHERE claimed), count(*) FILTER (WHERE ended),
        count(*) FILTER (WHERE ended AND errored),
        count(*) FILTER (WHERE n_state = 'succeeded' AND o_state <> 'succeeded'),
        count(*) FILTER (WHERE n_state = 'dead' AND o_state <> 'dead'),
        count(*) FILTER (WHERE n_state = 'cancelled' AND o_state <> 'cancelled'),
        coalesce(sum(run_ms) FILTER (WHERE ended), 0),
        coalesce(min(at_ms) FILTER (WHERE ended), 0), coalesce(max(at_ms) FILTER (WHERE ended), 0)
    FROM (
        SELECT floor(extract(epoch FROM n.updated_at) / 60)::bigint AS minute, n.queue, n.type,
            o.state AS o_state, n.state AS n_state,
            o.state = 'pending' AND n.state = 'running' AS claimed,
            o.state = 'running' AND n.state <> 'running' AND n.attempt = o.attempt AS ended,
            (n.errors -> -1) IS DISTINCT FROM (o.errors -> -1) AS errored,
            floor(extract(epoch FROM n.updated_at - o.attempted_at) * 1000)::bigint AS run_ms,
            floor(extract(epoch FROM n.updated_at) * 1000)::bigint AS at_ms
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE n.state <> o.state) x
    WHERE claimed OR ended OR (n_state IN ('succeeded', 'dead', 'cancelled'))
    GROUP BY minute, queue, type ORDER BY minute, queue, type
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
SELECT queue, type, {schema}.keel_count_kind(state, attempt), {schema}.keel_count_priority(state, priority),
    {schema}.keel_count_due(state, run_at), 0, count(*)
FROM {schema}.keel_tasks GROUP BY 1, 2, 3, 4, 5;
