package redisgate_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/redisgate"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  redisgate.Store = driver.Driver(nil) // the real drivers fit
	t0                 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// keys is a fake Redis. err fails every call while set; a call waits for
// hang to close when it is not nil, ignoring its context as go-redis does
// without ContextTimeoutEnabled.
type keys struct {
	mu       sync.Mutex
	held     map[string]string
	ttl      time.Duration // of the last SetNX
	err      error
	hang     chan struct{}
	releases []string // tokens released
}

func (k *keys) SetNX(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	if k.hang != nil {
		<-k.hang
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return false, k.err
	}
	k.ttl = ttl
	if _, ok := k.held[key]; ok {
		return false, nil
	}
	k.held[key] = token
	return true, nil
}

func (k *keys) Release(_ context.Context, key, token string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.releases = append(k.releases, token)
	if k.held[key] != token {
		return false, nil
	}
	delete(k.held, key)
	return true, nil
}

func (k *keys) get(key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.held[key]
	return v, ok
}

// store answers GetByKey: ErrNotFound until its call number appear, then
// row; err instead when set. Every call is counted.
type store struct {
	mu     sync.Mutex
	calls  int
	appear int // 0: never
	row    driver.TaskRow
	err    error
}

func (s *store) GetByKey(_ context.Context, key string) (*driver.TaskRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	switch {
	case s.err != nil:
		return nil, s.err
	case s.appear == 0 || s.calls < s.appear || key != s.row.IdemKey:
		return nil, driver.ErrNotFound
	}
	row := s.row
	return &row, nil
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

type bundle struct {
	keys  *keys
	drv   *store
	clk   *servicetest.Clock
	logs  *strings.Builder // written only by the test's goroutine's calls
	gate  *redisgate.Gate
	p     driver.InsertParams
	calls int // inserts made
}

func setup(t *testing.T, mod ...func(*redisgate.Config)) *bundle {
	t.Helper()
	b := &bundle{keys: &keys{held: map[string]string{}}, drv: &store{}, clk: servicetest.NewClock(t0),
		logs: &strings.Builder{}, p: driver.InsertParams{Type: "t", IdemKey: "k1", PayloadDigest: "d1"}}
	b.drv.row = driver.TaskRow{ID: 7, IdemKey: "k1", PayloadDigest: "d1"}
	cfg := redisgate.Config{Keys: b.keys, Store: b.drv, Clock: b.clk, Logger: slog.New(slog.NewTextHandler(b.logs, nil))}
	for _, m := range mod {
		m(&cfg)
	}
	b.gate = redisgate.New(cfg)
	return b
}

// insert is the insert a gate is given: it answers a new task with ID 1,
// or err.
func (b *bundle) insert(err error) func([]driver.InsertParams) ([]driver.InsertResult, error) {
	return func(ps []driver.InsertParams) ([]driver.InsertResult, error) {
		b.calls++
		if len(ps) != 1 || ps[0].IdemKey != b.p.IdemKey {
			panic("insert given other params")
		}
		if err != nil {
			return nil, err
		}
		return []driver.InsertResult{{Task: &driver.TaskRow{ID: 1, IdemKey: ps[0].IdemKey}}}, nil
	}
}

type result struct {
	out []driver.InsertResult
	err error
}

// insertAsync runs the gate's Insert in the background; the test moves
// the clock while it waits.
func (b *bundle) insertAsync(ctx context.Context) <-chan result {
	done := make(chan result, 1)
	go func() {
		out, err := b.gate.Insert(ctx, b.p, b.insert(nil))
		done <- result{out, err}
	}()
	return done
}

// TestAcquire: the submission that sets the key, under Prefix for TTL
// (defaults keel:gate: and 10s), inserts and keeps the key.
func TestAcquire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out, err := b.gate.Insert(t.Context(), b.p, b.insert(nil))
	if err != nil || len(out) != 1 || out[0].Task.ID != 1 || out[0].Duplicate || b.calls != 1 {
		t.Fatalf("Insert: %+v, %v, %d inserts", out, err, b.calls)
	}
	if _, ok := b.keys.get("keel:gate:k1"); !ok || b.keys.ttl != 10*time.Second {
		t.Fatalf("key held %v with TTL %v, want keel:gate:k1 for 10s", ok, b.keys.ttl)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{Acquired: 1}) || b.drv.count() != 0 {
		t.Fatalf("stats %+v, %d reads", st, b.drv.count())
	}
}

// TestInsertFailedReleases: the holder's insert failing releases its key,
// so the next submission need not wait out the TTL.
func TestInsertFailedReleases(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *redisgate.Config) { c.Prefix, c.TTL = "p:", time.Second })
	boom := errors.New("boom")
	if _, err := b.gate.Insert(t.Context(), b.p, b.insert(boom)); !errors.Is(err, boom) {
		t.Fatalf("Insert: %v, want the insert's error", err)
	}
	if v, ok := b.keys.get("p:k1"); ok || len(b.keys.releases) != 1 {
		t.Fatalf("key still held (%q) after %d releases", v, len(b.keys.releases))
	}
	if _, err := b.gate.Insert(t.Context(), b.p, b.insert(nil)); err != nil {
		t.Fatal(err)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{Acquired: 2}) {
		t.Fatalf("stats %+v", st)
	}
}

// TestHit: a submission that finds the key held polls for the holder's
// task, at pauses doubling from 2ms, and answers it as a duplicate
// without inserting.
func TestHit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.keys.held["keel:gate:k1"] = "other"
	b.drv.appear = 4
	done := b.insertAsync(t.Context())
	var pauses []time.Duration
	for range 3 {
		pauses = append(pauses, b.clk.AdvanceToNext(t))
	}
	r := servicetest.Recv(t, done)
	if r.err != nil || len(r.out) != 1 || r.out[0].Task.ID != 7 || !r.out[0].Duplicate || b.calls != 0 {
		t.Fatalf("Insert: %+v, %v, %d inserts; want task 7 as a duplicate", r.out, r.err, b.calls)
	}
	if want := []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond}; !slices.Equal(pauses, want) {
		t.Fatalf("pauses %v, want %v", pauses, want)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{Hits: 1}) || b.drv.count() != 4 {
		t.Fatalf("stats %+v, %d reads", st, b.drv.count())
	}
}

// TestFallbackAfterWait: when the holder's task does not appear within
// Wait (the pauses capped at 50ms and at what is left of Wait), the
// submission inserts.
func TestFallbackAfterWait(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *redisgate.Config) { c.Wait = 200 * time.Millisecond })
	b.keys.held["keel:gate:k1"] = "other"
	done := b.insertAsync(t.Context())
	want := []time.Duration{2, 4, 8, 16, 32, 50, 50, 38}
	var pauses []time.Duration
	for i := range want {
		want[i] *= time.Millisecond
		pauses = append(pauses, b.clk.AdvanceToNext(t))
	}
	r := servicetest.Recv(t, done)
	if r.err != nil || len(r.out) != 1 || r.out[0].Task.ID != 1 || r.out[0].Duplicate || b.calls != 1 {
		t.Fatalf("Insert: %+v, %v, %d inserts; want its own insert", r.out, r.err, b.calls)
	}
	if !slices.Equal(pauses, want) {
		t.Fatalf("pauses %v, want %v", pauses, want)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{Fallbacks: 1}) || b.drv.count() != len(want)+1 {
		t.Fatalf("stats %+v, %d reads", st, b.drv.count())
	}
}

// TestFallbackAtOnce: a holder with another payload, or a failed read,
// makes the submission insert without waiting: the database answers.
func TestFallbackAtOnce(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(s *store){
		"other payload": func(s *store) { s.appear, s.row.PayloadDigest = 1, "d2" },
		"read failed":   func(s *store) { s.err = errors.New("boom") },
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			b.keys.held["keel:gate:k1"] = "other"
			mod(b.drv)
			out, err := b.gate.Insert(t.Context(), b.p, b.insert(nil))
			if err != nil || out[0].Task.ID != 1 || b.calls != 1 || b.drv.count() != 1 {
				t.Fatalf("Insert: %+v, %v, %d inserts, %d reads", out, err, b.calls, b.drv.count())
			}
			if st := b.gate.Stats(); st != (redisgate.Stats{Fallbacks: 1}) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestSkipOnError: Redis failing skips the gate: every submission
// inserts, counted, logged at most once a minute.
func TestSkipOnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.keys.err = errors.New("connection refused")
	for range 3 {
		if out, err := b.gate.Insert(t.Context(), b.p, b.insert(nil)); err != nil || out[0].Task.ID != 1 {
			t.Fatalf("Insert: %+v, %v", out, err)
		}
	}
	b.clk.Advance(time.Minute)
	if _, err := b.gate.Insert(t.Context(), b.p, b.insert(nil)); err != nil {
		t.Fatal(err)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{Skipped: 4}) || b.calls != 4 {
		t.Fatalf("stats %+v, %d inserts", st, b.calls)
	}
	l := b.logs.String()
	if strings.Count(l, "Redis gate skipped") != 2 || !strings.Contains(l, "connection refused") ||
		!strings.Contains(l, "skipped_total=1") || !strings.Contains(l, "skipped_total=4") {
		t.Fatalf("logs:\n%s\nwant the first skip and the one a minute later", l)
	}
}

// TestSkipOnHang: a Redis that does not answer within Timeout skips the
// gate even when the call ignores its context; the submission does not
// wait for it.
func TestSkipOnHang(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *redisgate.Config) { c.Timeout = 20 * time.Millisecond })
	b.keys.hang = make(chan struct{})
	defer close(b.keys.hang)
	start := time.Now()
	out, err := b.gate.Insert(t.Context(), b.p, b.insert(nil))
	if took := time.Since(start); err != nil || out[0].Task.ID != 1 || took > time.Second {
		t.Fatalf("Insert: %+v, %v after %v", out, err, took)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{Skipped: 1}) ||
		!strings.Contains(b.logs.String(), redisgate.ErrTimeout.Error()) {
		t.Fatalf("stats %+v, logs:\n%s", st, b.logs.String())
	}
}

// TestContextEnded: a submission whose context ends, before Redis
// answers or while it waits for the holder's task, returns the context's
// error and inserts nothing.
func TestContextEnded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.keys.hang = make(chan struct{})
	defer close(b.keys.hang)
	ctx, cancel := context.WithCancel(t.Context())
	done := b.insertAsync(ctx)
	cancel()
	if r := servicetest.Recv(t, done); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("ended before Redis answered: %v", r.err)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{}) || b.calls != 0 {
		t.Fatalf("stats %+v, %d inserts", st, b.calls)
	}

	b = setup(t)
	b.keys.held["keel:gate:k1"] = "other"
	ctx, cancel = context.WithCancel(t.Context())
	done = b.insertAsync(ctx)
	b.clk.WaitForWaiters(t, 1)
	cancel()
	if r := servicetest.Recv(t, done); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("ended while waiting: %v", r.err)
	}
	if st := b.gate.Stats(); st != (redisgate.Stats{}) || b.calls != 0 || b.drv.count() != 1 {
		t.Fatalf("stats %+v, %d inserts, %d reads", st, b.calls, b.drv.count())
	}
}
