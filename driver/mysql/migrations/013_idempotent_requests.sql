-- keel schema v12 for MySQL / MariaDB: idempotent HTTP requests (package
-- keel/idempotency).
--
-- keel_idempotency holds one row per scope (by default the request's method
-- and path) and Idempotency-Key: in_flight while the first request runs
-- (until locked_until, for owner), then done with the stored response until
-- expires_at. digest is the SHA-256 of the request.
CREATE TABLE IF NOT EXISTS keel_idempotency (
    scope        VARCHAR(255)  NOT NULL,
    idem_key     VARCHAR(255)  NOT NULL,
    digest       VARBINARY(32) NOT NULL,
    state        VARCHAR(16)   NOT NULL,
    owner        VARCHAR(64)   NOT NULL,
    status       INT           NOT NULL DEFAULT 0,
    headers      MEDIUMTEXT    NULL,
    body         LONGBLOB      NULL,
    created_at   DATETIME(6)   NOT NULL,
    expires_at   DATETIME(6)   NOT NULL,
    locked_until DATETIME(6)   NOT NULL,
    PRIMARY KEY (scope, idem_key),
    KEY keel_idempotency_expires (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
