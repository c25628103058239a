package postgres

import (
	"context"
	"fmt"
	"time"

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

// BeginRequest implements driver.IdempotencyStore.
func (d *Driver) BeginRequest(ctx context.Context, p driver.BeginRequestParams) (driver.BeginOutcome, *driver.StoredResponse, error) {
	if err := p.Validate(); err != nil {
		return 0, nil, err
	}
	q := pgxQuerier{db: d.pool}
	now := p.Now.UTC()
	out, resp, err := sqlutil.BeginRequest(p, sqlutil.RequestSteps{
		Insert: func() (bool, error) {
			n, err := q.exec(ctx, d.q(sqlInsertRequest), []any{p.Scope, p.Key, p.Digest, p.Owner, now, now.Add(p.TTL), now.Add(p.Lock)})
			return n == 1, err
		},
		TakeOver: func() (bool, error) {
			n, err := q.exec(ctx, d.q(sqlTakeOverRequest), []any{p.Digest, p.Owner, now, now.Add(p.TTL), now.Add(p.Lock), p.Scope, p.Key})
			return n == 1, err
		},
		Get: func() (*sqlutil.RequestRow, error) {
			var out *sqlutil.RequestRow
			err := q.query(ctx, d.q(sqlGetRequest), []any{p.Scope, p.Key}, func(scan func(dest ...any) error) error {
				var r sqlutil.RequestRow
				var headers string
				if err := scan(&r.State, &r.Digest, &r.Response.Status, &headers, &r.Response.Body); err != nil {
					return err
				}
				if headers != "" {
					r.Response.Headers = []byte(headers)
				}
				out = &r
				return nil
			})
			return out, err
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
	n, err := pgxQuerier{db: d.pool}.exec(ctx, d.q(sqlFinishRequest),
		[]any{p.Response.Status, string(p.Response.Headers), body, p.Scope, p.Key, p.Owner})
	if err != nil {
		return false, fmt.Errorf("finish request %s %q: %w", p.Scope, p.Key, err)
	}
	return n == 1, nil
}

// ReleaseRequest implements driver.IdempotencyStore.
func (d *Driver) ReleaseRequest(ctx context.Context, scope, key, owner string) (bool, error) {
	n, err := pgxQuerier{db: d.pool}.exec(ctx, d.q(sqlReleaseRequest), []any{scope, key, owner})
	if err != nil {
		return false, fmt.Errorf("release request %s %q: %w", scope, key, err)
	}
	return n == 1, nil
}

// PurgeRequests implements driver.IdempotencyStore.
func (d *Driver) PurgeRequests(ctx context.Context, before time.Time) (int64, error) {
	n, err := pgxQuerier{db: d.pool}.exec(ctx, d.q(sqlPurgeRequests), []any{before.UTC()})
	if err != nil {
		return 0, fmt.Errorf("purge idempotent requests: %w", err)
	}
	return n, nil
}

var _ driver.IdempotencyStore = (*Driver)(nil)
