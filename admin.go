package keel

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/bulk"
	"github.com/keelq/keel/internal/catalog"
	"github.com/keelq/keel/internal/conv"
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

// RetryMatching requeues up to f.Limit matching dead (or cancelled) tasks:
// they become pending, runnable now, with their attempts reset. It returns
// how many it moved; call it again until it returns 0 to requeue them all.
// A task whose idempotency key another task now holds stays where it is.
func (c *Client) RetryMatching(ctx context.Context, f Filter) (int64, error) {
	n, err := bulk.Ops{Store: c.drv, Now: c.cfg.Now, Wrap: unavailable}.Retry(ctx, f)
	if n > 0 {
		c.eng.Load().WroteQueue(f.Queue)
	}
	return n, err
}

// PurgeMatching deletes up to f.Limit matching dead (or cancelled) tasks
// for good and returns how many it deleted.
func (c *Client) PurgeMatching(ctx context.Context, f Filter) (int64, error) {
	return bulk.Ops{Store: c.drv, Now: c.cfg.Now, Wrap: unavailable}.Purge(ctx, f)
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
	// Prefetch is how many of the queue's tasks this client claims ahead
	// of a free slot (its QueueConfig.Prefetch after the default), 0 when
	// none or when it does not work the queue.
	Prefetch int
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
	return conv.Slice(queues, func(q catalog.Queue) QueueInfo {
		q.Prefetch = c.prefetch(q.Name)
		return QueueInfo(q)
	}), nil
}

// Types lists every task type that holds tasks, is known to this client,
// or has settings, ordered by name.
func (c *Client) Types(ctx context.Context) ([]TypeInfo, error) {
	types, err := catalog.Lister{Store: c.drv, Wrap: unavailable}.Types(ctx, slices.Collect(maps.Keys(c.types)))
	if err != nil {
		return nil, err
	}
	return conv.Slice(types, typeInfo), nil
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
	s, err := c.patch(ctx, driver.SettingPatch{Kind: driver.SettingQueue, Name: name, Paused: u.Paused, Concurrency: u.Concurrency,
		Rate: u.Rate, Burst: u.Burst})
	if err != nil {
		return nil, err
	}
	q := catalog.QueueOf(name, *s, c.workers(name))
	q.Prefetch = c.prefetch(name)
	info := QueueInfo(q)
	return &info, nil
}

// workers is how many of queue's tasks this client runs at once: 0 when it
// does not work the queue.
func (c *Client) workers(queue string) int {
	if !c.cfg.Handlers.handled() {
		return 0
	}
	return c.cfg.Queues[queue].MaxWorkers
}

// prefetch is how many of queue's tasks this client claims ahead: 0 when
// none or when it does not work the queue.
func (c *Client) prefetch(queue string) int {
	if c.workers(queue) == 0 {
		return 0
	}
	return max(c.cfg.Queues[queue].Prefetch, 0)
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
	s, err := c.patch(ctx, driver.SettingPatch{Kind: driver.SettingType, Name: name, Paused: u.Paused, Concurrency: u.Concurrency,
		Timeout: u.Timeout, MaxAttempts: u.MaxAttempts, BackoffBase: u.BackoffBase, BackoffMax: u.BackoffMax, Rate: u.Rate, Burst: u.Burst})
	if err != nil {
		return nil, err
	}
	t := typeInfo(catalog.TypeOf(name, *s))
	return &t, nil
}

// patch checks and stores a change to a queue's or type's settings, and
// applies it to this client at once.
func (c *Client) patch(ctx context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	s, err := catalog.Patcher{Store: c.drv, Now: c.cfg.Now, Wrap: unavailable}.Patch(ctx, p)
	if err == nil {
		c.eng.Load().ApplySetting(*s)
	}
	return s, err
}

// MaxRate is the highest rate a queue or type takes, in tasks per second;
// MaxBurst the largest bucket.
const (
	MaxRate  = 1_000_000
	MaxBurst = 1_000_000
)
