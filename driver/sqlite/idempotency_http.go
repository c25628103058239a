package sqlite

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Idempotent HTTP requests (keel_idempotency, migration 013).

const sqlInsertRequest = `INSERT INTO keel_idempotency
	(scope, idem_key, digest, state, owner, created_at, expires_at, locked_until)
VALUES (?, ?, ?, 'in_flight', ?, ?, ?, ?) ON CONFLICT (scope, idem_key) DO NOTHING`

// sqlTakeOverRequest replaces an expired row, or an in-flight one of the
// same request whose lock ran out (its process is presumed dead).
const sqlTakeOverRequest = `UPDATE keel_idempotency SET digest = ?, state = 'in_flight', owner = ?,
	status = 0, headers = NULL, body = NULL, created_at = ?, expires_at = ?, locked_until = ?
WHERE scope = ? AND idem_key = ?
	AND (expires_at <= ? OR (state = 'in_flight' AND locked_until <= ? AND digest = ?))`

const sqlGetRequest = `SELECT state, digest, status, coalesce(headers, ''), coalesce(body, x'')
FROM keel_idempotency WHERE scope = ? AND idem_key = ?`

var _ driver.IdempotencyStore = (*Driver)(nil)

// requestSQL are the idempotent request statements of sqlutil.Ops.
var requestSQL = sqlutil.RequestSQL{Insert: sqlInsertRequest, TakeOver: sqlTakeOverRequest, Get: sqlGetRequest,
	Finish: sqlutil.QFinishRequest, Release: sqlutil.QReleaseRequest, Purge: sqlutil.QPurgeRequests,
	TakeOverArgs: func(p driver.BeginRequestParams, now, expires, locked any) []any {
		return []any{p.Digest, p.Owner, now, expires, locked, p.Scope, p.Key, now, now, p.Digest}
	},
}
