-- Periodic tasks: one row per schedule. last_tick is the unix second of the
-- last tick enqueued (or passed over); the leader advances it with a
-- compare-and-set in the transaction that inserts the tick's task.
CREATE TABLE {schema}.keel_schedules (
    name       text COLLATE "C" PRIMARY KEY,
    spec       text        NOT NULL,
    time_zone  text        NOT NULL,
    type       text COLLATE "C" NOT NULL,
    queue      text COLLATE "C" NOT NULL,
    payload    text        NOT NULL,
    priority   integer     NOT NULL,
    missed     text        NOT NULL CHECK (missed IN ('run_once', 'skip')),
    paused     boolean     NOT NULL DEFAULT false,
    last_tick  bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
