-- keel schema v11 for SQLite: fallbacks when a task dies, and the automatic
-- brake.
--
-- keel_types gains the type's on_dead follow-up type (NULL: none), whether
-- a dead task of the type runs the library's OnDead hook, and the brake's
-- thresholds declared for the type (0: keel's default; brake_window -1:
-- the type never brakes).
ALTER TABLE keel_types ADD COLUMN on_dead TEXT;
ALTER TABLE keel_types ADD COLUMN on_dead_hook INTEGER NOT NULL DEFAULT 0;
ALTER TABLE keel_types ADD COLUMN brake_window INTEGER NOT NULL DEFAULT 0;
ALTER TABLE keel_types ADD COLUMN brake_threshold REAL NOT NULL DEFAULT 0;
ALTER TABLE keel_types ADD COLUMN brake_cooldown_ms INTEGER NOT NULL DEFAULT 0;

-- keel_brakes holds each braked type's brake: closed, open (its tasks are
-- not claimed until open_until) or half_open (one probe task may run). A type
-- without a row is closed. Times are Unix microseconds.
CREATE TABLE keel_brakes (
    type          TEXT    PRIMARY KEY,
    state         TEXT    NOT NULL,
    opened_at     INTEGER,
    open_until    INTEGER,
    probe_task_id INTEGER,
    probe_owner   TEXT,
    probe_at      INTEGER,
    probe_attempt INTEGER NOT NULL DEFAULT 0,
    ratio         REAL    NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,
    reason        TEXT    NOT NULL DEFAULT '',
    closed_at     INTEGER,
    updated_at    INTEGER NOT NULL,
    -- Thresholds set at runtime (the API), over the declared ones; 0: not
    -- set, cfg_window -1: the type never brakes.
    cfg_window      INTEGER NOT NULL DEFAULT 0,
    cfg_threshold   REAL    NOT NULL DEFAULT 0,
    cfg_cooldown_ms INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
