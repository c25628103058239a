// Package backoff computes retry delays: exponential with jitter and a cap.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: Base × 2^(attempt-1), spread by ±Jitter
// (a fraction, 0.2 = ±20 %), never more than Max.
type Policy struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// Delay returns the wait before the retry that follows failed attempt
// number attempt (1 for the first attempt).
func (p Policy) Delay(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := p.Base
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	if p.Jitter > 0 {
		spread := float64(d) * p.Jitter
		d = time.Duration(float64(d) - spread + rand.Float64()*2*spread)
	}
	if d < 0 {
		d = 0
	}
	return d
}
