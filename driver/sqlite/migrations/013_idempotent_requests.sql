-- keel schema v12 for SQLite: idempotent HTTP requests (package
-- keel/idempotency).
--
-- keel_idempotency holds one row per scope (by default the request's method
-- and path) and Idempotency-Key: in_flight while the first request runs
-- (until locked_until, for owner), then done with the stored response until
-- expires_at. digest is the SHA-256 of the request. Times are Unix
-- microseconds.
CREATE TABLE keel_idempotency (
    scope        TEXT    NOT NULL,
    idem_key     TEXT    NOT NULL,
    digest       BLOB    NOT NULL,
    state        TEXT    NOT NULL,
    owner        TEXT    NOT NULL,
    status       INTEGER NOT NULL DEFAULT 0,
    headers      TEXT,
    body         BLOB,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    locked_until INTEGER NOT NULL,
    PRIMARY KEY (scope, idem_key)
) WITHOUT ROWID;

CREATE INDEX keel_idempotency_expires ON keel_idempotency (expires_at);
