package keel

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/catalog"
	"github.com/keelq/keel/internal/check"
)

// Filter selects tasks, the one selector of List, RetryMatching and
// PurgeMatching; zero fields do not filter:
//
//	State                          a state (List: any; bulk: dead, the default, or cancelled)
//	Type, Queue                    a task type, a queue
//	CreatedAfter, CreatedBefore    arrival time, inclusive / exclusive (List only)
//	FinishedAfter, FinishedBefore  finish time, inclusive / exclusive; an unfinished task matches neither
//	BeforeID                       ids below it, for paging (List only)
//	AfterID                        ids above it: a bounded window to search (List only)
//	Limit                          List: default 100, at most 1000; bulk: per call, default 1000, at most 10000
//	IDs                            only these tasks, at most 1000 (bulk only; List refuses it)
//
// With IDs, a bulk operation still takes only the listed tasks that match
// the other fields (dead, or cancelled when asked), so a listed id of a
// task in another state is left alone and not counted.
type Filter = driver.Filter

// bulk applies the bulk operations' defaults to f and validates it.
func bulk(f Filter) (driver.Filter, error) {
	p := f
	p.State, p.Limit = cmp.Or(f.State, StateDead), cmp.Or(f.Limit, 1000)
	if err := checkTimeFilters("finished_after", p.FinishedAfter, "finished_before", p.FinishedBefore); err != nil {
		return p, err
	}
	switch {
	case p.Type != "" && !validName(p.Type):
		return p, invalid("invalid task type %q", p.Type)
	case p.Queue != "" && !validName(p.Queue):
		return p, invalid("invalid queue name %q", p.Queue)
	case !p.FinishedAfter.IsZero() && !p.FinishedBefore.IsZero() && !p.FinishedAfter.Before(p.FinishedBefore):
		return p, invalid("finished_after must be before finished_before")
	}
	if err := p.ValidateBulk(); err != nil { // dead or cancelled, limit 1..10000, no created or id bounds
		return p, invalid("filter %v", err)
	}
	return p, nil
}

// RetryMatching requeues up to f.Limit matching dead (or cancelled) tasks:
// they become pending, runnable now, with their attempts reset. It returns
// how many it moved; call it again until it returns 0 to requeue them all.
// A task whose idempotency key another task now holds stays where it is.
func (c *Client) RetryMatching(ctx context.Context, f Filter) (int64, error) {
	p, err := bulk(f)
	if err != nil {
		return 0, err
	}
	n, err := c.drv.RetryMatching(ctx, p, c.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("keel: requeue tasks: %w", unavailable(ctx, err))
	}
	if n > 0 {
		c.eng.Load().WroteQueue(f.Queue)
	}
	return n, nil
}

// PurgeMatching deletes up to f.Limit matching dead (or cancelled) tasks
// for good and returns how many it deleted.
func (c *Client) PurgeMatching(ctx context.Context, f Filter) (int64, error) {
	p, err := bulk(f)
	if err != nil {
		return 0, err
	}
	n, err := c.drv.PurgeMatching(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("keel: purge tasks: %w", unavailable(ctx, err))
	}
	return n, nil
}

// QueueInfo is one queue: its task counts and runtime settings.
type QueueInfo struct {
	Name   string
	Counts map[State]int64
	// Paused queues are not claimed from on any node.
	Paused bool
	// Concurrency, when set, caps the queue's running tasks across every
	// node of the cluster (each node also stays within its MaxWorkers).
	// 0: not set.
	Concurrency int
	// Rate, when set, caps how many of the queue's tasks start per second
	// across the cluster, with bursts of up to Burst (0: max(1,
	// ceil(Rate))). 0: not set.
	Rate      float64
	Burst     int
	UpdatedAt time.Time // of the settings; zero if never set
	// MaxWorkers is how many of the queue's tasks this client runs at once
	// (its Config.Queues), 0 when it does not work the queue (not among
	// its queues, or no handlers). A Concurrency above it caps nothing here.
	MaxWorkers int
}

// TypeInfo is one task type: its task counts and runtime settings.
type TypeInfo struct {
	Name   string
	Counts map[State]int64
	// Paused types are not claimed on any node.
	Paused bool
	// Concurrency, when set, caps the type's running tasks across every
	// node of the cluster, in all queues.
	Concurrency int
	// Rate, when set, caps how many of the type's tasks start per second
	// across the cluster, with bursts of up to Burst (0: max(1,
	// ceil(Rate))). 0: not set.
	Rate  float64
	Burst int
	// Overrides; zero means not set (the task's own value applies).
	Timeout     time.Duration
	MaxAttempts int
	BackoffBase time.Duration
	BackoffMax  time.Duration
	UpdatedAt   time.Time
	// OnDead is the type's declared on_dead follow-up type ("": none).
	OnDead string
	// Brake is the type's automatic brake: its state (closed when it never
	// opened) and, when open, why and until when.
	Brake BrakeInfo
}

// Queues lists every queue that holds tasks, is configured on this client,
// or has settings, ordered by name.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	workers := map[string]int{}
	for name := range c.cfg.Queues {
		workers[name] = c.workers(name)
	}
	queues, err := catalog.Lister{Store: c.drv, Wrap: unavailable}.Queues(ctx, workers)
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(queues))
	for i, q := range queues {
		out[i] = QueueInfo(q)
	}
	return out, nil
}

// Types lists every task type that holds tasks, is known to this client,
// or has settings, ordered by name.
func (c *Client) Types(ctx context.Context) ([]TypeInfo, error) {
	types, err := catalog.Lister{Store: c.drv, Wrap: unavailable}.Types(ctx, slices.Collect(maps.Keys(c.types)))
	if err != nil {
		return nil, err
	}
	out := make([]TypeInfo, len(types))
	for i, t := range types {
		out[i] = typeInfo(t)
	}
	return out, nil
}

// typeInfo is the public form of a listed type.
func typeInfo(t catalog.Type) TypeInfo {
	return TypeInfo{Name: t.Name, Counts: t.Counts, Paused: t.Paused, Concurrency: t.Concurrency, Rate: t.Rate, Burst: t.Burst,
		Timeout: t.Timeout, MaxAttempts: t.MaxAttempts, BackoffBase: t.BackoffBase, BackoffMax: t.BackoffMax,
		UpdatedAt: t.UpdatedAt, OnDead: t.OnDead, Brake: brakeFromRow(t.Brake)}
}

// QueueUpdate changes a queue's runtime settings; nil fields keep theirs.
// Every node applies a change within Config.SettingsInterval.
type QueueUpdate struct {
	Paused *bool
	// Concurrency caps the queue's running tasks across the cluster; 0
	// clears the cap; at most 10000.
	Concurrency *int
	// Rate caps the queue's task starts per second across the cluster
	// (a finite number up to 1,000,000; 0 clears it); Burst is its
	// bucket size (1..1,000,000; 0: the default max(1, ceil(rate))).
	Rate  *float64
	Burst *int
}

// UpdateQueue stores a change to queue name's runtime settings and returns
// the queue.
func (c *Client) UpdateQueue(ctx context.Context, name string, u QueueUpdate) (*QueueInfo, error) {
	if !validName(name) {
		return nil, invalid("invalid queue name %q", name)
	}
	if u.Concurrency != nil && (*u.Concurrency < 0 || *u.Concurrency > 10000) {
		return nil, invalid("concurrency must be in 0..10000, got %d", *u.Concurrency)
	}
	if err := checkRate(u.Rate, u.Burst); err != nil {
		return nil, err
	}
	if u.Paused == nil && u.Concurrency == nil && u.Rate == nil && u.Burst == nil {
		return nil, invalid("nothing to change")
	}
	s, err := c.drv.PatchSetting(ctx, driver.SettingPatch{
		Kind: driver.SettingQueue, Name: name, Paused: u.Paused, Concurrency: u.Concurrency,
		Rate: u.Rate, Burst: u.Burst, Now: c.cfg.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("keel: update queue %s: %w", name, unavailable(ctx, err))
	}
	if e := c.eng.Load(); e != nil {
		e.ApplySetting(*s)
	}
	q := QueueInfo(catalog.QueueOf(name, *s, c.workers(name)))
	return &q, nil
}

// workers is how many of queue's tasks this client runs at once: 0 when it
// does not work the queue.
func (c *Client) workers(queue string) int {
	if !c.cfg.Handlers.handled() {
		return 0
	}
	return c.cfg.Queues[queue].MaxWorkers
}

// TypeUpdate changes a task type's runtime settings; nil fields keep
// theirs, a pointer to zero clears an override. Every node applies a change
// within Config.SettingsInterval.
type TypeUpdate struct {
	Paused *bool
	// Concurrency caps the type's running tasks across the cluster, in
	// all queues; 0 clears the cap; at most 10000.
	Concurrency *int
	// Rate caps the type's task starts per second across the cluster
	// (a finite number up to 1,000,000; 0 clears it); Burst is its
	// bucket size (1..1,000,000; 0: the default max(1, ceil(rate))).
	Rate        *float64
	Burst       *int
	Timeout     *time.Duration // 1ms..24h in whole milliseconds, or 0 to clear
	MaxAttempts *int           // 1..1000, or 0 to clear
	BackoffBase *time.Duration // 1ms..168h in whole milliseconds, or 0 to clear
	BackoffMax  *time.Duration // as BackoffBase, and not below it; or 0 to clear
}

// UpdateType stores a change to task type name's runtime settings and
// returns the type.
func (c *Client) UpdateType(ctx context.Context, name string, u TypeUpdate) (*TypeInfo, error) {
	if !validName(name) {
		return nil, invalid("invalid task type %q", name)
	}
	if u.Paused == nil && u.Concurrency == nil && u.Timeout == nil && u.MaxAttempts == nil && u.BackoffBase == nil && u.BackoffMax == nil &&
		u.Rate == nil && u.Burst == nil {
		return nil, invalid("nothing to change")
	}
	if err := checkRate(u.Rate, u.Burst); err != nil {
		return nil, err
	}
	if u.Concurrency != nil && (*u.Concurrency < 0 || *u.Concurrency > 10000) {
		return nil, invalid("concurrency must be in 0..10000, got %d", *u.Concurrency)
	}
	if u.MaxAttempts != nil && (*u.MaxAttempts < 0 || *u.MaxAttempts > 1000) {
		return nil, invalid("max_attempts must be in 1..1000, got %d", *u.MaxAttempts)
	}
	// The rules keel config check applies to [types.X] (0 clears here).
	var bad error
	report := func(field, problem string) {
		if bad == nil {
			bad = invalid("%s %s", field, problem)
		}
	}
	for _, f := range []struct {
		name  string
		d     *time.Duration
		check func(string, time.Duration, check.Bad)
	}{{"timeout", u.Timeout, check.Timeout}, {"backoff_base", u.BackoffBase, check.Backoff}, {"backoff_max", u.BackoffMax, check.Backoff}} {
		if f.d != nil && *f.d != 0 {
			f.check(f.name, *f.d, report)
		}
	}
	if bad != nil {
		return nil, bad
	}
	if u.BackoffBase != nil && u.BackoffMax != nil && *u.BackoffMax != 0 && *u.BackoffMax < *u.BackoffBase {
		return nil, invalid("backoff_max (%v) must not be below backoff_base (%v)", *u.BackoffMax, *u.BackoffBase)
	}
	s, err := c.drv.PatchSetting(ctx, driver.SettingPatch{
		Kind: driver.SettingType, Name: name, Paused: u.Paused, Concurrency: u.Concurrency, Timeout: u.Timeout, MaxAttempts: u.MaxAttempts,
		BackoffBase: u.BackoffBase, BackoffMax: u.BackoffMax, Rate: u.Rate, Burst: u.Burst, Now: c.cfg.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("keel: update type %s: %w", name, unavailable(ctx, err))
	}
	if e := c.eng.Load(); e != nil {
		e.ApplySetting(*s)
	}
	t := typeInfo(catalog.TypeOf(name, *s))
	return &t, nil
}

// MaxRate is the highest rate a queue or type takes, in tasks per second;
// MaxBurst the largest bucket.
const (
	MaxRate  = 1_000_000
	MaxBurst = 1_000_000
)

// checkRate checks a rate and burst change: a finite rate in 0..MaxRate
// (0 clears it) and a burst in 0..MaxBurst (0: the default).
func checkRate(rate *float64, burst *int) error {
	if rate != nil && (math.IsNaN(*rate) || *rate < 0 || *rate > MaxRate) {
		return invalid("rate must be a number of tasks per second in 0..%d (0 clears it), got %v", MaxRate, *rate)
	}
	if burst != nil && (*burst < 0 || *burst > MaxBurst) {
		return invalid("burst must be in 0..%d (0: the default, max(1, ceil(rate))), got %d", MaxBurst, *burst)
	}
	return nil
}
