package sqlutil

import (
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
