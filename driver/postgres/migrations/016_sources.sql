-- keel schema v15 for PostgreSQL: broker sources (package keel/source).
--
-- keel_rejected keeps every message a source could not turn into a task
-- (not JSON, no key, too large): its raw body (at most 8 MiB; size is the
-- whole length), its headers as a JSON object and the reason, until an
-- operator resubmits it (resubmitted_at, task_id) or deletes it. A
-- redelivered message has the same source and digest (SHA-256 of the body)
-- and is not stored twice.
--
-- keel_sources holds each source's latest report per node: its counters
-- since it started and its state.
CREATE TABLE {schema}.keel_rejected (
    id             bigserial PRIMARY KEY,
    source         text COLLATE "C" NOT NULL,
    type           text COLLATE "C" NOT NULL,
    queue          text COLLATE "C" NOT NULL DEFAULT '',
    key_spec       text        NOT NULL DEFAULT '',
    reason         text        NOT NULL,
    body           bytea       NOT NULL,
    size           bigint      NOT NULL,
    headers        text        NOT NULL DEFAULT '{}',
    digest         bytea       NOT NULL,
    received_at    timestamptz NOT NULL,
    resubmitted_at timestamptz,
    task_id        bigint
);

CREATE UNIQUE INDEX keel_rejected_digest ON {schema}.keel_rejected (source, digest);
CREATE INDEX keel_rejected_source ON {schema}.keel_rejected (source, id);

CREATE TABLE {schema}.keel_sources (
    source     text COLLATE "C" NOT NULL,
    node       text COLLATE "C" NOT NULL,
    kind       text        NOT NULL,
    type       text        NOT NULL,
    state      text        NOT NULL,
    last_error text        NOT NULL DEFAULT '',
    accepted   bigint      NOT NULL DEFAULT 0,
    duplicate  bigint      NOT NULL DEFAULT 0,
    rejected   bigint      NOT NULL DEFAULT 0,
    nacked     bigint      NOT NULL DEFAULT 0,
    ack_p50_us bigint      NOT NULL DEFAULT 0,
    ack_p99_us bigint      NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (source, node)
);
