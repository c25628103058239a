-- keel schema v13 for SQLite: broker sources (package keel/source).
--
-- keel_rejected keeps every message a source could not turn into a task
-- (not JSON, no key, too large): its raw body (at most 8 MiB; size is the
-- whole length), its headers as a JSON object and the reason, until an
-- operator resubmits it (resubmitted_at, task_id) or deletes it. A
-- redelivered message has the same source and digest (SHA-256 of the body)
-- and is not stored twice.
--
-- keel_sources holds each source's latest report per node: its counters
-- since it started and its state. Times are Unix microseconds.
CREATE TABLE keel_rejected (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    source         TEXT    NOT NULL,
    type           TEXT    NOT NULL,
    queue          TEXT    NOT NULL DEFAULT '',
    key_spec       TEXT    NOT NULL DEFAULT '',
    reason         TEXT    NOT NULL,
    body           BLOB    NOT NULL,
    size           INTEGER NOT NULL,
    headers        TEXT    NOT NULL DEFAULT '{}',
    digest         BLOB    NOT NULL,
    received_at    INTEGER NOT NULL,
    resubmitted_at INTEGER,
    task_id        INTEGER
);

CREATE UNIQUE INDEX keel_rejected_digest ON keel_rejected (source, digest);
CREATE INDEX keel_rejected_source ON keel_rejected (source, id);

CREATE TABLE keel_sources (
    source     TEXT    NOT NULL,
    node       TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    last_error TEXT    NOT NULL DEFAULT '',
    accepted   INTEGER NOT NULL DEFAULT 0,
    duplicate  INTEGER NOT NULL DEFAULT 0,
    rejected   INTEGER NOT NULL DEFAULT 0,
    nacked     INTEGER NOT NULL DEFAULT 0,
    ack_p50_us INTEGER NOT NULL DEFAULT 0,
    ack_p99_us INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (source, node)
) WITHOUT ROWID;
