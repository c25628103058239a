package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// ClaimLimited implements driver.Driver: one operation of the single
// writer, whose transaction (BEGIN IMMEDIATE) holds the database's write
// lock against every process from its start, so the limits' rows, the
// count of running tasks and the claim are one consistent step.
func (d *Driver) ClaimLimited(ctx context.Context, p driver.LimitedClaimParams) (driver.LimitedClaim, error) {
	if err := p.Validate(); err != nil {
		return driver.LimitedClaim{}, err
	}
	include, exclude, ok := sqlutil.ClaimTypes(p.ClaimParams)
	if !ok {
		return driver.LimitedClaim{}, nil // no type to claim
	}
	var res driver.LimitedClaim
	err := d.write(ctx, func(tx querier) error {
		var err error
		res, err = sqlutil.ClaimLimited(p, sqlutil.LimitedSteps{
			Now: func() (int64, error) { return micros(p.Now), nil },
			Lock: func(l driver.Limit) (driver.LimitState, bool, error) {
				var s driver.LimitState
				err := tx.QueryRowContext(ctx, sqlLimitRow, string(l.Kind), l.Name).
					Scan(&s.Concurrency, &s.Rate, &s.Burst, &s.Tokens, &s.TokensAt)
				if errors.Is(err, sql.ErrNoRows) {
					return s, false, nil
				}
				return s, err == nil, err
			},
			Running: func(l driver.Limit) (n int, err error) {
				q := sqlRunningOfType
				if l.Kind == driver.SettingQueue {
					q = sqlRunningOfQueue
				}
				err = tx.QueryRowContext(ctx, q, l.Name).Scan(&n)
				return n, err
			},
			Claim: func(n int) ([]driver.TaskRow, error) {
				cp := p.ClaimParams
				cp.Limit = n
				return d.claimCounted(ctx, tx, cp, include, exclude)
			},
			Spend: func(l driver.Limit, tokens float64, at int64) error {
				_, err := tx.ExecContext(ctx, sqlSpendTokens, string(l.Kind), l.Name, tokens, at)
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
