-- keel schema v8 for PostgreSQL: the archive. The leader moves succeeded,
-- cancelled and dead tasks past their retention from keel_tasks to
-- keel_archive (Driver.Archive) in small batches, so the task table does
-- not grow without bound and the claim does not slow down; Get still finds
-- them by id. Rows keep their id and every column; archived_at is when
-- they moved. No idempotency index: an archived task no longer holds its
-- key. No triggers: the DELETE from keel_tasks takes the rows off the live
-- counters (migration 007) and adds nothing to the history.
CREATE TABLE {schema}.keel_archive (
    id               bigint      PRIMARY KEY,
    queue            text        NOT NULL,
    type             text        NOT NULL,
    priority         integer     NOT NULL,
    payload          jsonb       NOT NULL,
    state            text        NOT NULL,
    attempt          integer     NOT NULL,
    max_attempts     integer     NOT NULL,
    fence            bigint      NOT NULL,
    run_at           timestamptz NOT NULL,
    timeout_ms       bigint      NOT NULL,
    idem_key         text,
    payload_digest   text        NOT NULL,
    lease_owner      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    attempted_at     timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL,
    errors           jsonb       NOT NULL,
    result           jsonb,
    meta             jsonb,
    snoozes          integer     NOT NULL,
    archived_at      timestamptz NOT NULL
);

-- PurgeArchive deletes the oldest archived rows first.
CREATE INDEX keel_archive_archived ON {schema}.keel_archive (archived_at);

-- Archival finds succeeded and dead tasks by finish time on
-- keel_tasks_finished (migration 004); cancelled tasks, which that index
-- leaves out, on this one. Cancels are rare and off the claim path.
CREATE INDEX keel_tasks_cancelled ON {schema}.keel_tasks (finished_at)
    WHERE state = 'cancelled';
