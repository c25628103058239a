-- keel schema for PostgreSQL: the update trigger of the live counters
-- (007) pairs each row's old and new versions with a hash join.
--
-- 007 paired them with an aggregate over both transition tables, grouped
-- by id, to keep the planner from a nested loop: plpgsql plans the
-- statement once per session, on the size of the first statement's
-- transition tables, and a join planned for one row turned into a nested
-- loop over hundreds. The aggregate cost about 6 µs of server time per
-- task drained (a claim and a success of 500, one connection,
-- BenchmarkRawClaimFinish); the join, with nested loops off for this
-- function only, costs about 3.5 µs whatever the first statement's size.
-- The counts are the same: the conformance suite's counter walks check
-- every write path.
CREATE OR REPLACE FUNCTION {schema}.keel_counted_update() RETURNS trigger LANGUAGE plpgsql AS $$
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

    -- The minute's figures of the rows whose state changed (see 007).
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
        SELECT n.queue, n.type, o.state AS o_state, n.state AS n_state,
            o.state = 'running' AND n.attempt = o.attempt AS ended,
            round(date_part('epoch', o.attempted_at) * 1000000)::bigint AS o_attempted_us,
            round(date_part('epoch', n.updated_at) * 1000000)::bigint AS n_us,
            CASE WHEN o.state = 'running' THEN (o.errors -> -1)::text END AS o_err,
            CASE WHEN n.state IN ('pending', 'dead') THEN (n.errors -> -1)::text END AS n_err
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE n.state <> o.state) x
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
END $$ SET enable_nestloop = off;
