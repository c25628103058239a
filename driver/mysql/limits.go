package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// ClaimLimited implements driver.Driver: one READ COMMITTED transaction
// that locks the limits' rows (a locking read, in kind and name order),
// counts, claims and spends the tokens. Every limited claim of a limit
// waits for the one holding its row; each statement after the lock reads
// what committed before it began, so the count includes every claim that
// held the lock before.
func (d *Driver) ClaimLimited(ctx context.Context, p driver.LimitedClaimParams) (driver.LimitedClaim, error) {
	if err := p.Validate(); err != nil {
		return driver.LimitedClaim{}, err
	}
	include, exclude, ok := sqlutil.ClaimTypes(p.ClaimParams)
	if !ok {
		return driver.LimitedClaim{}, nil // no type to claim
	}
	var res driver.LimitedClaim
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = sqlutil.ClaimLimited(p, sqlutil.LimitedSteps{
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
			Now: func() (int64, error) {
				var now time.Time
				err := tx.QueryRowContext(ctx, sqlLimitNow.text, sqlLimitNow.args(d.now(p.Now))...).Scan(&now)
				return now.UnixMicro(), err
			},
			Claim: func(n int) ([]driver.TaskRow, error) {
				cp := p.ClaimParams
				cp.Limit = n
				return d.claimTx(ctx, tx, cp, include, exclude)
			},
			Spend: func(l driver.Limit, tokens float64, at int64) error {
				_, err := tx.ExecContext(ctx, sqlSpendTokens, tokens, at, string(l.Kind), l.Name)
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
