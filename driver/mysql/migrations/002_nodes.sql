-- keel schema v2 for MySQL / MariaDB: the node registry. Every worker
-- process keeps its row fresh with its heartbeat; the leader removes stale rows.
CREATE TABLE keel_nodes (
    name         VARCHAR(255) NOT NULL PRIMARY KEY,
    host         VARCHAR(255) NOT NULL,
    pid          INT          NOT NULL,
    queues       JSON         NOT NULL,
    started_at   DATETIME(6)  NOT NULL,
    heartbeat_at DATETIME(6)  NOT NULL,
    KEY keel_nodes_heartbeat (heartbeat_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
