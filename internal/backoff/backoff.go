// Package backoff computes retry delays: exponential with jitter and a cap.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: Base × 2^(attempt-1), spread by ±Jitter
// (a fraction, 0.2 = ±20 %), never more than Max. Near the cap the spread
// stays below it: a delay is drawn from [d×(1-Jitter), min(d×(1+Jitter),
// Max)], so retries that reached the cap still spread out.
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
	for i := 1; i < attempt && (p.Max <= 0 || d < p.Max); i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	if p.Jitter > 0 {
		lo := float64(d) * (1 - p.Jitter)
		hi := float64(d) * (1 + p.Jitter)
		if p.Max > 0 {
			hi = min(hi, float64(p.Max))
		}
		d = time.Duration(lo + rand.Float64()*(hi-lo))
	}
	if d < 0 {
		d = 0
	}
	return d
}
