-- Periodic tasks: one row per schedule. last_tick is the unix second of the
-- last tick enqueued (or passed over); the leader advances it with a
-- compare-and-set in the transaction that inserts the tick's task.
CREATE TABLE keel_schedules (
    name       TEXT    PRIMARY KEY,
    spec       TEXT    NOT NULL,
    time_zone  TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    priority   INTEGER NOT NULL,
    missed     TEXT    NOT NULL CHECK (missed IN ('run_once', 'skip')),
    paused     INTEGER NOT NULL DEFAULT 0,
    last_tick  INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
