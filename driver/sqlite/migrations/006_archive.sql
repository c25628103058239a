-- keel schema v6 for SQLite: the archive. The leader moves succeeded,
-- cancelled and dead tasks past their retention from keel_tasks to
-- keel_archive (Driver.Archive) in small batches, so the task table does
-- not grow without bound; Get still finds them by id. Rows keep their id
-- and every column; archived_at (Unix microseconds) is when they moved.
-- No idempotency index: an archived task no longer holds its key.
CREATE TABLE keel_archive (
    id               INTEGER PRIMARY KEY,
    queue            TEXT    NOT NULL,
    type             TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    payload          TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    fence            INTEGER NOT NULL,
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
    errors           TEXT    NOT NULL,
    result           TEXT,
    meta             TEXT,
    snoozes          INTEGER NOT NULL,
    archived_at      INTEGER NOT NULL
);

-- PurgeArchive deletes the oldest archived rows first.
CREATE INDEX keel_archive_archived ON keel_archive (archived_at);

-- Archival finds succeeded and dead tasks by finish time on
-- keel_tasks_finished (migration 003); cancelled tasks, which that index
-- leaves out, on this one. Cancels are rare and off the claim path.
CREATE INDEX keel_tasks_cancelled ON keel_tasks (finished_at)
    WHERE state = 'cancelled';
