package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// ClaimLimited implements driver.Driver: one transaction that locks the
// limits' rows (SELECT … FOR UPDATE, in kind and name order), counts,
// claims and spends the tokens. Every limited claim of a limit waits for
// the one holding its row, and commits before it lets the next one count.
func (d *Driver) ClaimLimited(ctx context.Context, p driver.LimitedClaimParams) (driver.LimitedClaim, error) {
	if err := p.Validate(); err != nil {
		return driver.LimitedClaim{}, err
	}
	include, exclude, ok := sqlutil.ClaimTypes(p.ClaimParams)
	if !ok {
		return driver.LimitedClaim{}, nil // no type to claim
	}
	var res driver.LimitedClaim
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		q := pgxQuerier{db: tx}
		var err error
		res, err = sqlutil.ClaimLimited(p, sqlutil.LimitedSteps{
			Lock: func(l driver.Limit) (s driver.LimitState, found bool, err error) {
				err = q.query(ctx, d.sql.limitRow, []any{string(l.Kind), l.Name}, func(scan func(...any) error) error {
					found = true
					return scan(&s.Concurrency, &s.Rate, &s.Burst, &s.Tokens, &s.TokensAt)
				})
				return s, found, err
			},
			Running: func(l driver.Limit) (n int, err error) {
				query := d.sql.runningOfType
				if l.Kind == driver.SettingQueue {
					query = d.sql.runningOfQueue
				}
				err = q.query(ctx, query, []any{l.Name}, func(scan func(...any) error) error { return scan(&n) })
				return n, err
			},
			Now: func() (now int64, err error) {
				err = q.query(ctx, d.sql.limitNow, []any{d.now(p.Now)}, func(scan func(...any) error) error { return scan(&now) })
				return now, err
			},
			Claim: func(n int) ([]driver.TaskRow, error) {
				cp := p.ClaimParams
				cp.Limit = n
				return d.claim(ctx, q, cp, include, exclude)
			},
			Spend: func(l driver.Limit, tokens float64, at int64) error {
				_, err := q.exec(ctx, d.sql.spendTokens, []any{string(l.Kind), l.Name, tokens, at})
				return err
			},
		})
		return err
	})
	if err != nil {
		return driver.LimitedClaim{}, fmt.Errorf("limited claim: %w", err)
	}
	driver.SortClaimed(res.Rows)
	return res, nil
}
