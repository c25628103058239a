package catalog

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/check"
	"github.com/keelq/keel/internal/kerr"
)

// MaxRate is the highest rate a queue or type takes, in tasks per second;
// MaxBurst the largest bucket (keel's MaxRate and MaxBurst).
const (
	MaxRate  = 1_000_000
	MaxBurst = 1_000_000
)

// PatchStore is what a Patcher writes.
type PatchStore interface {
	PatchSetting(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error)
}

// Patcher stores changes to queues' and types' settings.
type Patcher struct {
	Store PatchStore
	Now   func() time.Time
	// Wrap turns the write's error into the error returned (the client
	// marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Patch checks p (see CheckPatch), stores it as of now and returns the
// setting stored.
func (pt Patcher) Patch(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	if err := CheckPatch(p); err != nil {
		return nil, err
	}
	p.Now = pt.Now()
	s, err := pt.Store.PatchSetting(ctx, p)
	if err != nil {
		if pt.Wrap != nil {
			err = pt.Wrap(ctx, err)
		}
		return nil, fmt.Errorf("keel: update %s %s: %w", p.Kind, p.Name, err)
	}
	return s, nil
}

// CheckPatch checks a change to a queue's or a task type's settings, as
// keel's UpdateQueue and UpdateType take it: its first problem is
// returned as an ErrInvalid error.
func CheckPatch(p driver.SettingPatch) error {
	if p.Kind == driver.SettingQueue {
		if !driver.ValidName(p.Name) {
			return kerr.Invalid("invalid queue name %q", p.Name)
		}
		return cmp.Or(concurrency(p.Concurrency), rate(p.Rate, p.Burst), unchanged(p))
	}
	if !driver.ValidName(p.Name) {
		return kerr.Invalid("invalid task type %q", p.Name)
	}
	return cmp.Or(rate(p.Rate, p.Burst), concurrency(p.Concurrency), maxAttempts(p.MaxAttempts), durations(p), unchanged(p))
}

// unchanged refuses a patch that changes nothing.
func unchanged(p driver.SettingPatch) error {
	if p.Paused == nil && p.Concurrency == nil && p.Rate == nil && p.Burst == nil &&
		p.Timeout == nil && p.MaxAttempts == nil && p.BackoffBase == nil && p.BackoffMax == nil {
		return kerr.Invalid("nothing to change")
	}
	return nil
}

func concurrency(n *int) error {
	if n != nil && (*n < 0 || *n > 10000) {
		return kerr.Invalid("concurrency must be in 0..10000, got %d", *n)
	}
	return nil
}

func maxAttempts(n *int) error {
	if n != nil && (*n < 0 || *n > 1000) {
		return kerr.Invalid("max_attempts must be in 1..1000, got %d", *n)
	}
	return nil
}

// rate checks a rate and burst change: a finite rate in 0..MaxRate (0
// clears it) and a burst in 0..MaxBurst (0: the default).
func rate(rate *float64, burst *int) error {
	if rate != nil && (math.IsNaN(*rate) || *rate < 0 || *rate > MaxRate) {
		return kerr.Invalid("rate must be a number of tasks per second in 0..%d (0 clears it), got %v", MaxRate, *rate)
	}
	if burst != nil && (*burst < 0 || *burst > MaxBurst) {
		return kerr.Invalid("burst must be in 0..%d (0: the default, max(1, ceil(rate))), got %d", MaxBurst, *burst)
	}
	return nil
}

// durations checks a type's timeout and backoffs by the rules keel config
// check applies to [types.X], 0 clearing one here, and that backoff_max
// is not below backoff_base when both change.
func durations(p driver.SettingPatch) error {
	var bad error
	report := func(field, problem string) {
		if bad == nil {
			bad = kerr.Invalid("%s %s", field, problem)
		}
	}
	for _, f := range []struct {
		name string
		d    *time.Duration
		rule func(string, time.Duration, check.Bad)
	}{{"timeout", p.Timeout, check.Timeout}, {"backoff_base", p.BackoffBase, check.Backoff}, {"backoff_max", p.BackoffMax, check.Backoff}} {
		if f.d != nil && *f.d != 0 {
			f.rule(f.name, *f.d, report)
		}
	}
	if bad == nil && p.BackoffBase != nil && p.BackoffMax != nil && *p.BackoffMax != 0 && *p.BackoffMax < *p.BackoffBase {
		bad = kerr.Invalid("backoff_max (%v) must not be below backoff_base (%v)", *p.BackoffMax, *p.BackoffBase)
	}
	return bad
}
