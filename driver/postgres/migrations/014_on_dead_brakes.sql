-- keel schema v13 for PostgreSQL: fallbacks when a task dies, and the
-- automatic brake.
--
-- keel_types gains the type's on_dead follow-up type (NULL: none), whether
-- a dead task of the type runs the library's OnDead hook, and the brake's
-- thresholds declared for the type (0: keel's default; brake_window -1:
-- the type never brakes).
ALTER TABLE {schema}.keel_types ADD COLUMN on_dead text,
    ADD COLUMN on_dead_hook boolean NOT NULL DEFAULT false,
    ADD COLUMN brake_window integer NOT NULL DEFAULT 0,
    ADD COLUMN brake_threshold double precision NOT NULL DEFAULT 0,
    ADD COLUMN brake_cooldown_ms bigint NOT NULL DEFAULT 0;

-- keel_brakes holds each braked type's brake: closed, open (its tasks are
-- not claimed until open_until) or half_open (one probe task may run). A type
-- without a row is closed.
CREATE TABLE {schema}.keel_brakes (
    type          text COLLATE "C" PRIMARY KEY,
    state         text        NOT NULL,
    opened_at     timestamptz,
    open_until    timestamptz,
    probe_task_id bigint,
    probe_owner   text,
    probe_at      timestamptz,
    probe_attempt integer     NOT NULL DEFAULT 0,
    ratio         double precision NOT NULL DEFAULT 0,
    attempts      integer     NOT NULL DEFAULT 0,
    reason        text        NOT NULL DEFAULT '',
    closed_at     timestamptz,
    updated_at    timestamptz NOT NULL,
    -- Thresholds set at runtime (the API), over the declared ones; 0: not
    -- set, cfg_window -1: the type never brakes.
    cfg_window      integer NOT NULL DEFAULT 0,
    cfg_threshold   double precision NOT NULL DEFAULT 0,
    cfg_cooldown_ms bigint NOT NULL DEFAULT 0
);
