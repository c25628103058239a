-- keel schema v1 for SQLite. Times are Unix microseconds (UTC).
CREATE TABLE keel_tasks (
    id               INTEGER PRIMARY KEY,
    queue            TEXT    NOT NULL,
    type             TEXT    NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    payload          TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    fence            INTEGER NOT NULL DEFAULT 0, -- claims so far; never reset
    max_attempts     INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    timeout_ms       INTEGER NOT NULL,
    idem_key         TEXT,
    payload_digest   TEXT    NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    attempted_at     INTEGER,
    finished_at      INTEGER,
    updated_at       INTEGER NOT NULL,
    errors           TEXT    NOT NULL DEFAULT '[]',
    result           TEXT,
    meta             TEXT
);

-- The claim path reads only pending rows; finished rows never slow it.
CREATE INDEX keel_tasks_claim ON keel_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'pending';

-- The rescuer reads only running rows.
CREATE INDEX keel_tasks_lease ON keel_tasks (lease_expires_at)
    WHERE state = 'running';

-- The final arbiter of idempotency: a key is held while pending, running or
-- succeeded; dead and cancelled release it.
CREATE UNIQUE INDEX keel_tasks_idem ON keel_tasks (idem_key)
    WHERE idem_key IS NOT NULL AND state IN ('pending', 'running', 'succeeded');

-- Dead letters and cancelled tasks are listed by operators; succeeded rows
-- are not indexed by state so the hot path updates fewer indexes.
CREATE INDEX keel_tasks_failed ON keel_tasks (state, id)
    WHERE state IN ('dead', 'cancelled');

CREATE TABLE keel_leaders (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
