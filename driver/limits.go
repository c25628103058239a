package driver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Cluster-wide limits: a claim that holds the limiting settings' rows while
// it counts running tasks and spends rate tokens.

// Limit names a setting (keel_settings row) whose concurrency and rate a
// limited claim obeys: a queue's or a task type's.
type Limit struct {
	Kind SettingKind
	Name string
}

// LimitedClaimParams asks for up to ClaimParams.Limit tasks like Claim, but
// no more than each of Limits allows now: its Concurrency less the tasks of
// its queue (or type) running across the cluster, and the whole tokens of
// its Rate's bucket. The claim locks the limits' rows (in kind and name
// order, so two claims never deadlock), counts, claims and spends the
// tokens in one transaction: concurrent claims on any number of processes
// never exceed a limit. A limit without a row, or whose row sets neither
// Concurrency nor Rate, does not limit.
type LimitedClaimParams struct {
	ClaimParams
	Limits []Limit
}

// Validate rejects what no driver claims: a bad limit (an unknown kind, an
// empty name, one given twice) or a claim limit below 1.
func (p LimitedClaimParams) Validate() error {
	if p.Limit < 1 {
		return fmt.Errorf("limited claim: limit must be at least 1, got %d", p.Limit)
	}
	if len(p.Limits) == 0 {
		return errors.New("limited claim: no limit given")
	}
	for i, l := range p.Limits {
		if l.Kind != SettingQueue && l.Kind != SettingType {
			return fmt.Errorf("limited claim: kind must be queue or type, got %q", l.Kind)
		}
		if l.Name == "" {
			return errors.New("limited claim: empty limit name")
		}
		for _, o := range p.Limits[:i] {
			if o == l {
				return fmt.Errorf("limited claim: %s %q given twice", l.Kind, l.Name)
			}
		}
	}
	return nil
}

// SortedLimits returns limits in the order a driver locks their rows:
// by kind, then name.
func SortedLimits(limits []Limit) []Limit {
	out := slices.Clone(limits)
	slices.SortFunc(out, func(a, b Limit) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// LimitedClaim is what ClaimLimited claimed and why it did not claim more.
type LimitedClaim struct {
	// Rows are the claimed tasks, as Claim returns them.
	Rows []TaskRow
	// Full: a concurrency limit had no room for the tasks asked for.
	Full bool
	// TokenIn, when not zero, is how long after the claim (by the clock it
	// judged by: the caller's or the database's) a rate limit that had no
	// token for every task asked for has its next one.
	TokenIn time.Duration
}

// LimitState is a limit's row as a limited claim reads it under its lock.
type LimitState struct {
	Concurrency int
	Rate        float64
	Burst       int
	// Tokens is the bucket's content at TokensAt (Unix microseconds);
	// a nil TokensAt is a full bucket.
	Tokens   float64
	TokensAt *int64
	// Running is how many of its tasks run now across the cluster
	// (counted only when Concurrency is set).
	Running int
}

// Limited reports whether s limits anything.
func (s LimitState) Limited() bool { return s.Concurrency > 0 || s.Rate > 0 }

// BucketSize is the token bucket's size of rate and burst: burst, or
// max(1, ceil(rate)) when burst is 0.
func BucketSize(rate float64, burst int) float64 {
	if burst > 0 {
		return float64(burst)
	}
	return max(1, math.Ceil(rate))
}

// Refill returns the tokens of s's bucket at now (Unix microseconds): its
// tokens plus Rate per second since TokensAt, capped at the bucket size. A
// clock that went backwards (another process's) adds nothing.
func (s LimitState) Refill(now int64) float64 {
	size := BucketSize(s.Rate, s.Burst)
	if s.TokensAt == nil {
		return size
	}
	elapsed := max(0, float64(now-*s.TokensAt)) / 1e6
	return min(size, max(0, s.Tokens)+elapsed*s.Rate)
}

// PlanLimited is how many of asked tasks the limits allow at now (Unix
// microseconds), whether a concurrency limit is full, and when a rate
// limit that allows fewer than asked has its next token (0: none does).
func PlanLimited(states []LimitState, asked int, now int64) (n int, full bool, tokenAt int64) {
	n = asked
	for _, s := range states {
		if s.Concurrency > 0 {
			room := max(0, s.Concurrency-s.Running)
			if room < n {
				n, full = room, true
			}
		}
	}
	for _, s := range states {
		if s.Rate <= 0 {
			continue
		}
		tokens := s.Refill(now)
		if whole := int(math.Floor(tokens + 1e-9)); whole < asked {
			n = min(n, whole)
			at := now + int64(math.Ceil((1-(tokens-float64(whole)))/s.Rate*1e6))
			tokenAt = max(tokenAt, at)
		}
	}
	return n, full, tokenAt
}

// Spend returns the tokens left in s's bucket at now after got tasks
// started, as a driver stores them (tokens, tokens_at).
func (s LimitState) Spend(got int, now int64) (float64, int64) {
	if s.TokensAt != nil && *s.TokensAt > now {
		now = *s.TokensAt // never move the bucket's clock back
	}
	return max(0, s.Refill(now)-float64(got)), now
}
