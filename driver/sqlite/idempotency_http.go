package sqlite

import (
	"context"
	"fmt"
	"time"

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
	now := micros(p.Now)
	affected := func(query string, args ...any) (bool, error) {
		var n int64
		err := d.write(ctx, func(tx querier) error {
			res, err := tx.ExecContext(ctx, query, args...)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		return n == 1, err
	}
	out, resp, err := sqlutil.BeginRequest(p, sqlutil.RequestSteps{
		Insert: func() (bool, error) {
			return affected(sqlInsertRequest, p.Scope, p.Key, p.Digest, p.Owner, now, micros(p.Now.Add(p.TTL)), micros(p.Now.Add(p.Lock)))
		},
		TakeOver: func() (bool, error) {
			return affected(sqlTakeOverRequest, p.Digest, p.Owner, now, micros(p.Now.Add(p.TTL)), micros(p.Now.Add(p.Lock)),
				p.Scope, p.Key, now, now, p.Digest)
		},
		Get: func() (*sqlutil.RequestRow, error) {
			return sqlutil.GetRequest(ctx, d.rdb, sqlGetRequest, p.Scope, p.Key)
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
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlFinishRequest, p.Response.Status, string(p.Response.Headers), nonNil(p.Response.Body),
			p.Scope, p.Key, p.Owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finish request %s %q: %w", p.Scope, p.Key, err)
	}
	return n == 1, nil
}

// ReleaseRequest implements driver.IdempotencyStore.
func (d *Driver) ReleaseRequest(ctx context.Context, scope, key, owner string) (bool, error) {
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlReleaseRequest, scope, key, owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("release request %s %q: %w", scope, key, err)
	}
	return n == 1, nil
}

// PurgeRequests implements driver.IdempotencyStore.
func (d *Driver) PurgeRequests(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlPurgeRequests, micros(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge idempotent requests: %w", err)
	}
	return n, nil
}

// nonNil stores an empty body as an empty blob, not NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

var _ driver.IdempotencyStore = (*Driver)(nil)
