-- keel schema v2 for SQLite: the node registry. Every worker process keeps
-- its row fresh with its heartbeat; the leader removes stale rows. Times are
-- Unix microseconds; queues is a JSON array of names.
CREATE TABLE keel_nodes (
    name         TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    queues       TEXT    NOT NULL DEFAULT '[]',
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

CREATE INDEX keel_nodes_heartbeat ON keel_nodes (heartbeat_at);
