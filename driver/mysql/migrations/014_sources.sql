-- keel schema v13 for MySQL / MariaDB: broker sources (package keel/source).
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
--
-- Names are VARBINARY: compared and ordered byte by byte, trailing spaces
-- included (utf8mb4_bin pads), like on the other databases. TEXT columns
-- take no literal default on MySQL 8: every insert names them. The sizes
-- are the limits of driver.RejectedParams and driver.SourceReport.
CREATE TABLE IF NOT EXISTS keel_rejected (
    id             BIGINT         NOT NULL AUTO_INCREMENT,
    source         VARBINARY(200) NOT NULL,
    type           VARBINARY(200) NOT NULL,
    queue          VARBINARY(200) NOT NULL DEFAULT '',
    key_spec       VARCHAR(1000)  NOT NULL DEFAULT '',
    reason         TEXT           NOT NULL,
    body           LONGBLOB       NOT NULL,
    size           BIGINT         NOT NULL,
    headers        MEDIUMTEXT     NOT NULL,
    digest         VARBINARY(32)  NOT NULL,
    received_at    DATETIME(6)    NOT NULL,
    resubmitted_at DATETIME(6)    NULL,
    task_id        BIGINT         NULL,
    PRIMARY KEY (id),
    UNIQUE KEY keel_rejected_digest (source, digest),
    KEY keel_rejected_source (source, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS keel_sources (
    source     VARBINARY(200) NOT NULL,
    node       VARBINARY(200) NOT NULL,
    kind       VARCHAR(16)    NOT NULL,
    type       VARBINARY(200) NOT NULL,
    state      VARCHAR(16)    NOT NULL,
    last_error TEXT           NOT NULL,
    accepted   BIGINT         NOT NULL DEFAULT 0,
    duplicate  BIGINT         NOT NULL DEFAULT 0,
    rejected   BIGINT         NOT NULL DEFAULT 0,
    nacked     BIGINT         NOT NULL DEFAULT 0,
    ack_p50_us BIGINT         NOT NULL DEFAULT 0,
    ack_p99_us BIGINT         NOT NULL DEFAULT 0,
    started_at DATETIME(6)    NOT NULL,
    updated_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (source, node)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
