package declare_test

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
	"github.com/keelq/keel/internal/declare"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  declare.Store = driver.Driver(nil) // the real drivers fit
	t0               = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const maxAge = 10 * time.Second

// store is a fake keel_types table. Every ListTypes call's names are sent
// on lists and every DeclareTypes call on declares; listErr and
// declareErr fail the next calls while set; a DeclareTypes call waits for
// gate when it is not nil.
type store struct {
	mu         sync.Mutex
	rows       map[string]driver.TypeDefaults
	listErr    error
	declareErr error
	gate       chan struct{}
	lists      chan []string
	declares   chan driver.DeclareTypesParams
}

func newStore(rows ...driver.TypeDefaults) *store {
	s := &store{rows: map[string]driver.TypeDefaults{}, lists: make(chan []string, 100),
		declares: make(chan driver.DeclareTypesParams, 100)}
	for _, r := range rows {
		s.rows[r.Name] = r
	}
	return s
}

func (s *store) ListTypes(_ context.Context, names []string) ([]driver.TypeDefaults, error) {
	s.lists <- slices.Clone(names)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listErr != nil {
		return nil, s.listErr
	}
	var out []driver.TypeDefaults
	for _, n := range names {
		if r, ok := s.rows[n]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *store) DeclareTypes(_ context.Context, p driver.DeclareTypesParams) error {
	s.declares <- p
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.declareErr != nil {
		return s.declareErr
	}
	for _, r := range p.Types {
		r.UpdatedAt = p.Now
		s.rows[r.Name] = r
	}
	return nil
}

func (s *store) set(f func(s *store)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// logs is a log buffer safe for the background declaration's writes.
type logs struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type bundle struct {
	drv  *store
	clk  *servicetest.Clock
	logs *logs
	d    *declare.Declarations
}

func setup(t *testing.T, drv *store, own ...driver.TypeDefaults) *bundle {
	t.Helper()
	b := &bundle{drv: drv, clk: servicetest.NewClock(t0), logs: &logs{}}
	b.d = declare.New(declare.Config{Store: drv, Types: own, MaxAge: maxAge, Clock: b.clk,
		Now: func() time.Time { return t0.Add(time.Hour) }, Logger: slog.New(slog.NewTextHandler(b.logs, nil))})
	return b
}

func prio(n int) *int { return &n }

func names(ts []driver.TypeDefaults) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// TestDeclare: the first Declare reads the stored rows of the client's
// types and writes those that differ or are missing, once, logging a
// differing one; later calls touch nothing.
func TestDeclare(t *testing.T) {
	t.Parallel()
	drv := newStore(driver.TypeDefaults{Name: "a", Queue: "other"}, driver.TypeDefaults{Name: "b", Priority: prio(3)})
	b := setup(t, drv, driver.TypeDefaults{Name: "c", MaxAttempts: 2}, driver.TypeDefaults{Name: "b", Priority: prio(3)},
		driver.TypeDefaults{Name: "a", Queue: "mail"})
	for range 2 {
		if err := b.d.Declare(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := servicetest.Recv(t, drv.lists); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("read %v, want the client's types by name", got)
	}
	p := servicetest.Recv(t, drv.declares)
	if got := names(p.Types); !slices.Equal(got, []string{"a", "c"}) || !p.Now.Equal(t0.Add(time.Hour)) {
		t.Fatalf("wrote %v at %v, want a and c (b is stored alike) at Config.Now", got, p.Now)
	}
	servicetest.None(t, drv.lists)
	servicetest.None(t, drv.declares)
	if l := b.logs.String(); strings.Count(l, "declared with other defaults") != 1 || !strings.Contains(l, "type=a") ||
		!strings.Contains(l, `queue=\"other\"`) || !strings.Contains(l, `queue=\"mail\"`) {
		t.Fatalf("logs:\n%s\nwant one line on a with both queues", l)
	}
}

// TestDeclareNothing: a client without declarations never reads or writes.
func TestDeclareNothing(t *testing.T) {
	t.Parallel()
	drv := newStore()
	b := setup(t, drv)
	if err := b.d.Declare(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.d.DeclareLater(t.Context())
	servicetest.None(t, drv.lists)
	servicetest.None(t, drv.declares)
}

// TestDeclareError: a failed read or write is returned, saying what was
// done, and the next call tries again; a driver cut off by the deadline
// answers context.DeadlineExceeded whatever its own error says.
func TestDeclareError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	drv := newStore()
	b := setup(t, drv, driver.TypeDefaults{Name: "a", Queue: "mail"})
	drv.set(func(s *store) { s.listErr = boom })
	if err := b.d.Declare(t.Context()); !errors.Is(err, boom) || !strings.Contains(err.Error(), "read declared task types") {
		t.Fatalf("read failed: %v", err)
	}
	drv.set(func(s *store) { s.listErr, s.declareErr = nil, boom })
	if err := b.d.Declare(t.Context()); !errors.Is(err, boom) || !strings.Contains(err.Error(), "store declared task types") {
		t.Fatalf("write failed: %v", err)
	}
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if err := b.d.Declare(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("write past the deadline: %v, want DeadlineExceeded with the driver's text", err)
	}
	drv.set(func(s *store) { s.declareErr = nil })
	if err := b.d.Declare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(drv.lists) != 4 || len(drv.declares) != 3 {
		t.Fatalf("%d reads and %d writes, want every call to try again", len(drv.lists), len(drv.declares))
	}
	if err := b.d.Declare(t.Context()); err != nil || len(drv.lists) != 4 {
		t.Fatalf("after success: %v, %d reads", err, len(drv.lists))
	}
}

// TestDeclareLater: the declaration runs in the background, one at a time
// however many enqueues ask, and outlives the caller's context; a failure
// is logged and the next call tries again.
func TestDeclareLater(t *testing.T) {
	t.Parallel()
	drv := newStore()
	drv.gate = make(chan struct{})
	b := setup(t, drv, driver.TypeDefaults{Name: "a", Queue: "mail"})
	drv.set(func(s *store) { s.declareErr = errors.New("boom") })
	ctx, cancel := context.WithCancel(t.Context())
	b.d.DeclareLater(ctx) // returns at once: the write waits for gate
	cancel()
	servicetest.Recv(t, drv.declares)
	b.d.DeclareLater(t.Context()) // one is running: no second
	drv.gate <- struct{}{}
	waitFor(t, func() bool { return strings.Contains(b.logs.String(), "storing declared task types failed") })

	drv.set(func(s *store) { s.declareErr = nil })
	waitFor(t, func() bool { // the failed one has ended: this one starts
		b.d.DeclareLater(t.Context())
		return len(drv.declares) == 1
	})
	drv.gate <- struct{}{}
	servicetest.Recv(t, drv.declares)
	waitFor(t, func() bool {
		drv.mu.Lock()
		defer drv.mu.Unlock()
		return drv.rows["a"].Queue == "mail"
	})
	if len(drv.lists) != 2 {
		t.Fatalf("%d reads, want 2: one per background run", len(drv.lists))
	}
	if err := b.d.Declare(t.Context()); err != nil || len(drv.lists) != 2 {
		t.Fatalf("after the background run: %v, %d reads", err, len(drv.lists))
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStored: types never read are read at once, in one query; an entry
// younger than MaxAge is answered from the cache; an older one is
// answered as it is while it is read again; a type with no stored row is
// cached as nil.
func TestStored(t *testing.T) {
	t.Parallel()
	drv := newStore(driver.TypeDefaults{Name: "a", Queue: "mail"})
	b := setup(t, drv)
	ctx := t.Context()
	if got, err := b.d.Stored(ctx, nil); got != nil || err != nil {
		t.Fatalf("no types: %v, %v", got, err)
	}
	servicetest.None(t, drv.lists)

	got, err := b.d.Stored(ctx, []string{"a", "b", "a"})
	if err != nil || len(got) != 2 || got["a"] == nil || got["a"].Queue != "mail" || got["b"] != nil {
		t.Fatalf("first read: %v, %v", got, err)
	}
	if names := servicetest.Recv(t, drv.lists); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("read %v, want a and b once", names)
	}

	drv.set(func(s *store) { s.rows["a"] = driver.TypeDefaults{Name: "a", Queue: "bulk"} })
	b.clk.Advance(maxAge - time.Millisecond)
	if got, _ := b.d.Stored(ctx, []string{"a", "b"}); got["a"].Queue != "mail" {
		t.Fatalf("fresh entry: %+v, want the cached one", got["a"])
	}
	servicetest.None(t, drv.lists)

	b.clk.Advance(time.Millisecond)
	if got, _ := b.d.Stored(ctx, []string{"a"}); got["a"].Queue != "bulk" {
		t.Fatalf("stale entry: %+v, want it read again", got["a"])
	}
	if names := servicetest.Recv(t, drv.lists); !slices.Equal(names, []string{"a"}) {
		t.Fatalf("read %v, want only the stale a", names)
	}

	// A missing type is read with the stale ones.
	b.clk.Advance(maxAge)
	if got, err := b.d.Stored(ctx, []string{"a", "c"}); err != nil || got["a"].Queue != "bulk" || got["c"] != nil {
		t.Fatalf("stale and missing: %v, %v", got, err)
	}
	if names := servicetest.Recv(t, drv.lists); !slices.Equal(names, []string{"c", "a"}) {
		t.Fatalf("read %v, want the missing c and the stale a together", names)
	}
}

// TestStoredError: a failed read of a type never read is returned; a
// failed read of a stale entry answers the cached one and is tried again
// next time.
func TestStoredError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	drv := newStore(driver.TypeDefaults{Name: "a", Queue: "mail"})
	b := setup(t, drv)
	ctx := t.Context()
	drv.set(func(s *store) { s.listErr = boom })
	if _, err := b.d.Stored(ctx, []string{"a"}); !errors.Is(err, boom) || !strings.Contains(err.Error(), "read declared defaults") {
		t.Fatalf("missing, read failed: %v", err)
	}
	drv.set(func(s *store) { s.listErr = nil })
	if got, err := b.d.Stored(ctx, []string{"a"}); err != nil || got["a"].Queue != "mail" {
		t.Fatalf("read again: %v, %v", got, err)
	}
	drv.set(func(s *store) { s.listErr = boom })
	b.clk.Advance(maxAge)
	for range 2 {
		if got, err := b.d.Stored(ctx, []string{"a"}); err != nil || got["a"].Queue != "mail" {
			t.Fatalf("stale, read failed: %v, %v; want the cached entry", got, err)
		}
	}
	if len(drv.lists) != 4 {
		t.Fatalf("%d reads, want 4: each stale lookup tries again", len(drv.lists))
	}
}

// TestStoredConcurrent: many enqueues of a type never read make one read.
func TestStoredConcurrent(t *testing.T) {
	t.Parallel()
	drv := newStore(driver.TypeDefaults{Name: "a", Queue: "mail"})
	b := setup(t, drv)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if got, err := b.d.Stored(t.Context(), []string{"a"}); err != nil || got["a"].Queue != "mail" {
				t.Errorf("%v, %v", got, err)
			}
		})
	}
	wg.Wait()
	if len(drv.lists) != 1 {
		t.Fatalf("%d reads, want 1", len(drv.lists))
	}
}
