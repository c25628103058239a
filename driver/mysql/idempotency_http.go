package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Idempotent HTTP requests (keel_idempotency, migration 013).

const sqlInsertRequest = `INSERT IGNORE INTO keel_idempotency
	(scope, idem_key, digest, state, owner, created_at, expires_at, locked_until)
VALUES (?, ?, ?, 'in_flight', ?, ?, ?, ?)`

// sqlTakeOverRequest replaces an expired row, or an in-flight one of the
// same request whose lock ran out (its process is presumed dead).
const sqlTakeOverRequest = `UPDATE keel_idempotency SET state = 'in_flight', owner = ?,
	status = 0, headers = NULL, body = NULL, created_at = ?, expires_at = ?, locked_until = ?, digest = ?
WHERE scope = ? AND idem_key = ?
	AND (expires_at <= ? OR (state = 'in_flight' AND locked_until <= ? AND digest = ?))`

const sqlGetRequest = `SELECT state, digest, status, coalesce(headers, ''), coalesce(body, '')
FROM keel_idempotency WHERE scope = ? AND idem_key = ?`

const sqlFinishRequest = `UPDATE keel_idempotency SET state = 'done', status = ?, headers = ?, body = ?
WHERE scope = ? AND idem_key = ? AND owner = ? AND state = 'in_flight'`

const sqlReleaseRequest = `DELETE FROM keel_idempotency
WHERE scope = ? AND idem_key = ? AND owner = ? AND state = 'in_flight'`

const sqlPurgeRequests = `DELETE FROM keel_idempotency WHERE expires_at <= ?`

// BeginRequest implements driver.IdempotencyStore.
func (d *Driver) BeginRequest(ctx context.Context, p driver.BeginRequestParams) (driver.BeginOutcome, *driver.StoredResponse, error) {
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	now := p.Now.UTC()
	affected := func(query string, args ...any) (bool, error) {
		res, err := d.db.ExecContext(ctx, query, args...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}
	out, resp, err := sqlutil.BeginRequest(p, sqlutil.RequestSteps{
		Insert: func() (bool, error) {
			return affected(sqlInsertRequest, p.Scope, p.Key, p.Digest, p.Owner, now, now.Add(p.TTL), now.Add(p.Lock))
		},
		TakeOver: func() (bool, error) {
			return affected(sqlTakeOverRequest, p.Owner, now, now.Add(p.TTL), now.Add(p.Lock), p.Digest,
				p.Scope, p.Key, now, now, p.Digest)
		},
		Get: func() (*sqlutil.RequestRow, error) {
			return sqlutil.GetRequest(ctx, d.db, sqlGetRequest, p.Scope, p.Key)
		},
	})
	if err != nil {
		return 0, nil, fmt.Errorf("begin request %s %q: %w", p.Scope, p.Key, err)
	}
	return out, resp, nil
}

// FinishRequest implements driver.IdempotencyStore.
func (d *Driver) FinishRequest(ctx context.Context, p driver.FinishRequestParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	body := p.Response.Body
	if body == nil {
		body = []byte{}
	}
	res, err := d.db.ExecContext(ctx, sqlFinishRequest, p.Response.Status, string(p.Response.Headers), body, p.Scope, p.Key, p.Owner)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("finish request %s %q: %w", p.Scope, p.Key, err)
	}
	return n == 1, nil
}

// ReleaseRequest implements driver.IdempotencyStore.
func (d *Driver) ReleaseRequest(ctx context.Context, scope, key, owner string) (bool, error) {
	res, err := d.db.ExecContext(ctx, sqlReleaseRequest, scope, key, owner)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return false, fmt.Errorf("release request %s %q: %w", scope, key, err)
	}
	return n == 1, nil
}

// PurgeRequests implements driver.IdempotencyStore.
func (d *Driver) PurgeRequests(ctx context.Context, before time.Time) (int64, error) {
	res, err := d.db.ExecContext(ctx, sqlPurgeRequests, before.UTC())
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return 0, fmt.Errorf("purge idempotent requests: %w", err)
	}
	return n, nil
}

var _ driver.IdempotencyStore = (*Driver)(nil)
