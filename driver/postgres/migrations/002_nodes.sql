-- keel schema v2 for PostgreSQL: the node registry. Every worker process
-- keeps its row fresh with its heartbeat; the leader removes stale rows.
CREATE TABLE {schema}.keel_nodes (
    name         text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    queues       text[]      NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

CREATE INDEX keel_nodes_heartbeat ON {schema}.keel_nodes (heartbeat_at);
