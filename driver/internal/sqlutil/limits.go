package sqlutil

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// LimitedSteps are one driver's statements of a limited claim, each run in
// the claim's transaction.
type LimitedSteps struct {
	// Lock locks the limit's row and reads it; ok is false when there is
	// no row.
	Lock func(l driver.Limit) (s driver.LimitState, ok bool, err error)
	// Running counts the limit's running tasks.
	Running func(l driver.Limit) (int, error)
	// Claim claims up to n tasks.
	Claim func(n int) ([]driver.TaskRow, error)
	// Spend stores a limit's bucket.
	Spend func(l driver.Limit, tokens float64, at int64) error
	// Now reads the clock, in Unix microseconds, once every row is locked.
	Now func() (int64, error)
}

// ClaimLimited runs a limited claim (see driver.LimitedClaimParams) with a
// driver's steps inside its transaction: lock every limit's row in order,
// read the clock, count the running tasks of those with a
// concurrency, claim what they all allow, spend the tokens of those with a
// rate.
func ClaimLimited(p driver.LimitedClaimParams, steps LimitedSteps) (driver.LimitedClaim, error) {
	var res driver.LimitedClaim
	limits := driver.SortedLimits(p.Limits)
	states := make([]driver.LimitState, 0, len(limits))
	used := make([]driver.Limit, 0, len(limits))
	for _, l := range limits {
		s, ok, err := steps.Lock(l)
		if err != nil {
			return res, err
		}
		if !ok || !s.Limited() {
			continue
		}
		if s.Concurrency > 0 {
			if s.Running, err = steps.Running(l); err != nil {
				return res, err
			}
		}
		states, used = append(states, s), append(used, l)
	}
	now, err := steps.Now()
	if err != nil {
		return res, err
	}
	n, full, tokenAt := driver.PlanLimited(states, p.Limit, now)
	res.Full = full
	if tokenAt > 0 {
		res.TokenIn = time.Duration(tokenAt-now) * time.Microsecond
	}
	if n == 0 {
		return res, nil
	}
	rows, err := steps.Claim(n)
	if err != nil {
		return res, err
	}
	res.Rows = rows
	for i, s := range states {
		if s.Rate <= 0 || len(rows) == 0 {
			continue
		}
		tokens, t := s.Spend(len(rows), now)
		if err := steps.Spend(used[i], tokens, t); err != nil {
			return res, err
		}
	}
	return res, nil
}

// LimitSQL are a driver's statements of a limited claim: Row (kind, name)
// locks a limit's row and selects concurrency, rate, burst, tokens and
// tokens_at; RunningOfType and RunningOfQueue (name) count the running
// tasks; Spend stores a bucket, taking kind, name, tokens and tokens_at
// (with SpendKeyLast tokens, tokens_at, kind and name). Now reads the
// clock in the claim's transaction, in Unix microseconds.
type LimitSQL[Q any] struct {
	Row, RunningOfType, RunningOfQueue, Spend string
	SpendKeyLast                              bool
	Now                                       func(ctx context.Context, q Q, now time.Time) (int64, error)
}

// ClaimLimited implements driver.Driver: the limits' rows, the count of
// running tasks, the claim and the tokens spent in one transaction (see
// the driver's LimitSQL for how it locks).
func (o *Ops[Q]) ClaimLimited(ctx context.Context, p driver.LimitedClaimParams) (driver.LimitedClaim, error) {
	if err := p.Validate(); err != nil {
		return driver.LimitedClaim{}, err
	}
	include, exclude, ok := ClaimTypes(p.ClaimParams)
	if !ok {
		return driver.LimitedClaim{}, nil // no type to claim
	}
	s := o.c.SQL.Limits
	var res driver.LimitedClaim
	err := o.c.DB.Write(ctx, func(q Q) error {
		c := o.c.DB.Conn(q)
		var err error
		res, err = ClaimLimited(p, LimitedSteps{
			Lock: func(l driver.Limit) (driver.LimitState, bool, error) {
				st, err := One(c.Rows(ctx, s.Row, string(l.Kind), l.Name), func(scan Scan) (*driver.LimitState, error) {
					var st driver.LimitState
					return &st, scan(&st.Concurrency, &st.Rate, &st.Burst, &st.Tokens, &st.TokensAt)
				})
				if err != nil || st == nil {
					return driver.LimitState{}, false, err
				}
				return *st, true, nil
			},
			Running: func(l driver.Limit) (int, error) {
				query := s.RunningOfType
				if l.Kind == driver.SettingQueue {
					query = s.RunningOfQueue
				}
				return scanOne[int](c.Rows(ctx, query, l.Name))
			},
			Now: func() (int64, error) { return s.Now(ctx, q, p.Now) },
			Claim: func(n int) ([]driver.TaskRow, error) {
				cp := p.ClaimParams
				cp.Limit = n
				return o.c.ClaimIn(ctx, q, cp, include, exclude)
			},
			Spend: func(l driver.Limit, tokens float64, at int64) error {
				args := []any{string(l.Kind), l.Name, tokens, at}
				if s.SpendKeyLast {
					args = []any{tokens, at, string(l.Kind), l.Name}
				}
				_, err := c.Exec(ctx, s.Spend, args...)
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

// scanOne reads the one value of a one-row, one-column query (its zero
// value when there is no row).
func scanOne[T any](rows Rows) (T, error) {
	var v T
	err := rows(func(scan Scan) error { return scan(&v) })
	return v, err
}
