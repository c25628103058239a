// Package catalog lists the cluster's queues and task types with their
// task counts and runtime settings, as keel's Queues and Types report
// them: a name is listed when the live counters hold its tasks, when it
// has settings, or when the asking client knows it; a type also carries
// its declared on_dead follow-up and its stored brake.
package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
)

// Store is what a Lister reads. A Store that is also a driver.Braker
// gives the types' brakes.
type Store interface {
	Counts(ctx context.Context) ([]driver.CountRow, error)
	ListSettings(ctx context.Context) ([]driver.Setting, error)
	ListTypes(ctx context.Context, names []string) ([]driver.TypeDefaults, error)
}

// Queue is one queue (keel's QueueInfo, whose fields it mirrors).
type Queue struct {
	Name        string
	Counts      map[driver.State]int64
	Paused      bool
	Concurrency int
	Rate        float64
	Burst       int
	UpdatedAt   time.Time
	// MaxWorkers is how many of the queue's tasks the asking client runs
	// at once; Prefetch how many it claims ahead (the client sets it).
	MaxWorkers int
	Prefetch   int
}

// Type is one task type (keel's TypeInfo, whose fields it mirrors but
// for Brake).
type Type struct {
	Name                    string
	Counts                  map[driver.State]int64
	Paused                  bool
	Concurrency             int
	Rate                    float64
	Burst                   int
	Timeout                 time.Duration
	MaxAttempts             int
	BackoffBase, BackoffMax time.Duration
	UpdatedAt               time.Time
	OnDead                  string
	// Brake is the type's stored brake; zero when it has none.
	Brake driver.BrakeRow
}

// QueueOf is queue name with setting s and no counts.
func QueueOf(name string, s driver.Setting, workers int) Queue {
	q := Queue{Name: name, Counts: map[driver.State]int64{}, MaxWorkers: workers}
	q.setting(s)
	return q
}

func (q *Queue) setting(s driver.Setting) {
	q.Paused, q.Concurrency, q.Rate, q.Burst, q.UpdatedAt = s.Paused, s.Concurrency, s.Rate, s.Burst, s.UpdatedAt
}

// TypeOf is type name with setting s and no counts.
func TypeOf(name string, s driver.Setting) Type {
	t := Type{Name: name, Counts: map[driver.State]int64{}}
	t.setting(s)
	return t
}

func (t *Type) setting(s driver.Setting) {
	t.Paused, t.Concurrency, t.Rate, t.Burst, t.UpdatedAt = s.Paused, s.Concurrency, s.Rate, s.Burst, s.UpdatedAt
	t.Timeout, t.MaxAttempts, t.BackoffBase, t.BackoffMax = s.Timeout, s.MaxAttempts, s.BackoffBase, s.BackoffMax
}

// Lister lists queues and types.
type Lister struct {
	Store Store
	// Wrap turns a read's error into the error returned (the client marks
	// an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

func (l Lister) fail(ctx context.Context, what string, err error) error {
	if l.Wrap != nil {
		err = l.Wrap(ctx, err)
	}
	return fmt.Errorf("keel: %s: %w", what, err)
}

// Queues lists the queues of workers (the asking client's queues, with
// how many of each queue's tasks it runs at once), those with tasks and
// those with settings, ordered by name.
func (l Lister) Queues(ctx context.Context, workers map[string]int) ([]Queue, error) {
	counts, settings, err := l.overview(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Queue{}
	get := func(name string) *Queue {
		q := byName[name]
		if q == nil {
			q = &Queue{Name: name, Counts: map[driver.State]int64{}, MaxWorkers: workers[name]}
			byName[name] = q
		}
		return q
	}
	for name := range workers {
		get(name)
	}
	for _, r := range counts {
		get(r.Queue).Counts[state(r.Kind)] += r.N
	}
	for _, s := range settings {
		if s.Kind == driver.SettingQueue {
			get(s.Name).setting(s)
		}
	}
	return sorted(byName), nil
}

// Types lists the types of known (the asking client's), those with tasks,
// settings, a declared on_dead follow-up or a brake, ordered by name.
func (l Lister) Types(ctx context.Context, known []string) ([]Type, error) {
	counts, settings, err := l.overview(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Type{}
	get := func(name string) *Type {
		t := byName[name]
		if t == nil {
			t = &Type{Name: name, Counts: map[driver.State]int64{}}
			byName[name] = t
		}
		return t
	}
	for _, name := range known {
		get(name)
	}
	for _, r := range counts {
		get(r.Type).Counts[state(r.Kind)] += r.N
	}
	for _, s := range settings {
		if s.Kind == driver.SettingType {
			get(s.Name).setting(s)
		}
	}
	declared, err := l.Store.ListTypes(ctx, nil)
	if err != nil {
		return nil, l.fail(ctx, "list declared types", err)
	}
	for _, d := range declared {
		if d.OnDead != "" {
			get(d.Name).OnDead = d.OnDead
		}
	}
	if b, ok := l.Store.(driver.Braker); ok {
		brakes, err := b.ListBrakes(ctx)
		if err != nil {
			return nil, l.fail(ctx, "list brakes", err)
		}
		for _, r := range brakes {
			get(r.Type).Brake = r
		}
	}
	return sorted(byName), nil
}

func (l Lister) overview(ctx context.Context) ([]driver.CountRow, []driver.Setting, error) {
	counts, err := l.Store.Counts(ctx)
	if err != nil {
		return nil, nil, l.fail(ctx, "count tasks", err)
	}
	settings, err := l.Store.ListSettings(ctx)
	if err != nil {
		return nil, nil, l.fail(ctx, "list settings", err)
	}
	return counts, settings, nil
}

// state is the state a live counter's kind counts: retrying tasks are
// pending.
func state(kind string) driver.State {
	if kind == driver.KindRetrying {
		return driver.StatePending
	}
	return driver.State(kind)
}

// sorted returns the values of byName ordered by name.
func sorted[T any](byName map[string]*T) []T {
	out := make([]T, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}
