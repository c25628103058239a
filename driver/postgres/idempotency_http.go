package postgres

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Idempotent HTTP requests (keel_idempotency, migration 015).

const sqlInsertRequest = `INSERT INTO {schema}.keel_idempotency
	(scope, idem_key, digest, state, owner, created_at, expires_at, locked_until)
VALUES ($1, $2, $3, 'in_flight', $4, $5, $6, $7) ON CONFLICT (scope, idem_key) DO NOTHING`

// sqlTakeOverRequest replaces an expired row, or an in-flight one of the
// same request whose lock ran out (its process is presumed dead).
const sqlTakeOverRequest = `UPDATE {schema}.keel_idempotency SET digest = $1, state = 'in_flight', owner = $2,
	status = 0, headers = NULL, body = NULL, created_at = $3, expires_at = $4, locked_until = $5
WHERE scope = $6 AND idem_key = $7
	AND (expires_at <= $3 OR (state = 'in_flight' AND locked_until <= $3 AND digest = $1))`

const sqlGetRequest = `SELECT state, digest, status, coalesce(headers, ''), coalesce(body, ''::bytea)
FROM {schema}.keel_idempotency WHERE scope = $1 AND idem_key = $2`

const sqlFinishRequest = `UPDATE {schema}.keel_idempotency SET state = 'done', status = $1, headers = $2, body = $3
WHERE scope = $4 AND idem_key = $5 AND owner = $6 AND state = 'in_flight'`

const sqlReleaseRequest = `DELETE FROM {schema}.keel_idempotency
WHERE scope = $1 AND idem_key = $2 AND owner = $3 AND state = 'in_flight'`

const sqlPurgeRequests = `DELETE FROM {schema}.keel_idempotency WHERE expires_at <= $1`

var _ driver.IdempotencyStore = (*Driver)(nil)

// requestSQL are the idempotent request statements of sqlutil.Ops.
var requestSQL = sqlutil.RequestSQL{Insert: sqlInsertRequest, TakeOver: sqlTakeOverRequest, Get: sqlGetRequest,
	Finish: sqlFinishRequest, Release: sqlReleaseRequest, Purge: sqlPurgeRequests,
	TakeOverArgs: func(p driver.BeginRequestParams, now, expires, locked any) []any {
		return []any{p.Digest, p.Owner, now, expires, locked, p.Scope, p.Key}
	},
}
