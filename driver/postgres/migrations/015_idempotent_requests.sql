-- keel schema v14 for PostgreSQL: idempotent HTTP requests (package
-- keel/idempotency).
--
-- keel_idempotency holds one row per scope (by default the request's method
-- and path) and Idempotency-Key: in_flight while the first request runs
-- (until locked_until, for owner), then done with the stored response until
-- expires_at. digest is the SHA-256 of the request.
CREATE TABLE {schema}.keel_idempotency (
    scope        text COLLATE "C" NOT NULL,
    idem_key     text COLLATE "C" NOT NULL,
    digest       bytea       NOT NULL,
    state        text        NOT NULL,
    owner        text        NOT NULL,
    status       integer     NOT NULL DEFAULT 0,
    headers      text,
    body         bytea,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    locked_until timestamptz NOT NULL,
    PRIMARY KEY (scope, idem_key)
);

CREATE INDEX keel_idempotency_expires ON {schema}.keel_idempotency (expires_at);
