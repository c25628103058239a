package completer_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/completer"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_       completer.Finisher = driver.Driver(nil) // the real drivers fit
	errDown                    = errors.New("connection refused")
	t0                         = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// finisher is a fake driver: every call is sent on calls, and answered by
// reply (default: every transition applied).
type finisher struct {
	calls chan driver.FinishParams
	reply func(call int, p driver.FinishParams) ([]int64, error)
	n     atomic.Int64 // calls so far, from any of the writers
}

func (f *finisher) Finish(_ context.Context, p driver.FinishParams) ([]int64, error) {
	n := int(f.n.Add(1))
	select {
	case f.calls <- p:
	default: // a runaway test; never block the completer
	}
	if f.reply == nil {
		return ids(p), nil
	}
	return f.reply(n, p)
}

func ids(p driver.FinishParams) []int64 {
	out := make([]int64, len(p.Transitions))
	for i, t := range p.Transitions {
		out[i] = t.ID
	}
	return out
}

type done struct {
	id      int64
	applied bool
	err     error
	at      time.Time // the clock when Done was called
}

type bundle struct {
	clk  *servicetest.Clock
	drv  *finisher
	c    *completer.Completer
	done chan done
}

func setup(t *testing.T, cfg completer.Config) *bundle {
	t.Helper()
	b := &bundle{clk: servicetest.NewClock(t0), drv: &finisher{calls: make(chan driver.FinishParams, 1000)}, done: make(chan done, 100)}
	cfg.Driver, cfg.Clock, cfg.Owner = b.drv, b.clk, "node-1"
	b.c = completer.New(cfg)
	t.Cleanup(func() {
		// Stop waits for failing writes to give up: move time on until it
		// returns, so a failed test does not hang here.
		stopped := make(chan struct{})
		go func() { b.c.Stop(); close(stopped) }()
		for {
			select {
			case <-stopped:
				return
			case <-time.After(time.Millisecond):
				b.clk.Advance(time.Second)
			}
		}
	})
	return b
}

// req is a request for task id whose outcome lands on b.done; a zero
// lease is none known.
func (b *bundle) req(id int64, lease time.Time) completer.Request {
	return completer.Request{
		Transition: driver.Transition{ID: id, Fence: id * 10, State: driver.StateSucceeded},
		Owner:      owner{b, id, lease},
	}
}

// owner is a test request's completer.Owner.
type owner struct {
	b     *bundle
	id    int64
	lease time.Time
}

func (o owner) LeaseExpiresAt() (time.Time, bool) { return o.lease, !o.lease.IsZero() }
func (o owner) Done(applied bool, err error) {
	o.b.done <- done{o.id, applied, err, o.b.clk.Now()}
}

// TestGroupCommit: what arrives while every writer is busy (here the only
// one) is written together by the next write.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{Writers: 1})
	release := make(chan struct{})
	b.drv.reply = func(call int, p driver.FinishParams) ([]int64, error) {
		if call == 1 {
			<-release // the first write is slow
			return ids(p), nil
		}
		return []int64{2, 4}, nil // 3 was fenced off: its lease was lost
	}
	b.c.Start(context.Background())

	b.c.Add(b.req(1, time.Time{}))
	first := servicetest.Recv(t, b.drv.calls)
	if first.Owner != "node-1" || !first.Now.Equal(t0) || len(first.Transitions) != 1 || first.Transitions[0].Fence != 10 {
		t.Fatalf("first write = %+v, want task 1 fenced 10 by node-1 at t0", first)
	}
	// Everything that arrives while a write is under way goes into the next.
	for id := int64(2); id <= 4; id++ {
		b.c.Add(b.req(id, time.Time{}))
	}
	close(release)
	if d := servicetest.Recv(t, b.done); !d.applied || d.err != nil {
		t.Fatalf("task 1: %+v", d)
	}
	second := servicetest.Recv(t, b.drv.calls)
	if got := ids(second); !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("second write finished %v, want [2 3 4] in one batch", got)
	}
	got := map[int64]done{}
	for range 3 {
		d := servicetest.Recv(t, b.done)
		got[d.id] = d
	}
	if !got[2].applied || got[3].applied || !got[4].applied || got[3].err != nil {
		t.Fatalf("outcomes %+v: want 2 and 4 applied, 3 rejected without error", got)
	}
	servicetest.None(t, b.drv.calls)
}

// TestIdleWritesAtOnce: an idle completer writes a
// transition as it comes, alone, without waiting for company: the clock
// never moves, and nothing waits on it.
func TestIdleWritesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{})
	b.c.Start(context.Background())
	for id := int64(1); id <= 3; id++ {
		b.c.Add(b.req(id, time.Time{}))
		p := servicetest.Recv(t, b.drv.calls)
		if got := ids(p); !slices.Equal(got, []int64{id}) || !p.Now.Equal(t0) {
			t.Fatalf("write %v at %v, want task %d alone at once (t0)", got, p.Now.Sub(t0), id)
		}
		if d := servicetest.Recv(t, b.done); d.id != id || !d.applied || !d.at.Equal(t0) {
			t.Fatalf("outcome %+v, want task %d applied at t0", d, id)
		}
		if n := b.clk.Waiters(); n != 0 {
			t.Fatalf("%d waits on the clock after an idle write, want none", n)
		}
	}
}

// TestWritesBesideSlowWrite: a transition that arrives while a write is
// under way waits for it at most Overflow: then another writer writes it,
// not after the slow (here hung) write.
func TestWritesBesideSlowWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{Overflow: 5 * time.Millisecond})
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before Stop, which waits for the write
	b.drv.reply = func(call int, p driver.FinishParams) ([]int64, error) {
		if p.Transitions[0].ID == 1 {
			<-release // task 1's write hangs
		}
		return ids(p), nil
	}
	b.c.Start(context.Background())
	b.c.Add(b.req(1, time.Time{}))
	servicetest.Recv(t, b.drv.calls)
	b.c.Add(b.req(2, time.Time{}))
	servicetest.None(t, b.drv.calls) // it waits for the write under way ...
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(5 * time.Millisecond) // ... for Overflow at most
	if p := servicetest.Recv(t, b.drv.calls); !slices.Equal(ids(p), []int64{2}) || !p.Now.Equal(t0.Add(5*time.Millisecond)) {
		t.Fatalf("second write %v at %v, want task 2 at Overflow", ids(p), p.Now.Sub(t0))
	}
	if d := servicetest.Recv(t, b.done); d.id != 2 || !d.applied {
		t.Fatalf("outcome %+v, want task 2 applied while task 1's write hangs", d)
	}
	unblock()
	if d := servicetest.Recv(t, b.done); d.id != 1 || !d.applied {
		t.Fatalf("outcome %+v, want task 1 applied", d)
	}
}

// TestBatchesBehindAWrite: with every default (four writers), what
// arrives during a short write is written together once it ends, in one
// commit, not in writes side by side.
func TestBatchesBehindAWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{})
	release := make(chan struct{})
	b.drv.reply = func(call int, p driver.FinishParams) ([]int64, error) {
		if call == 1 {
			<-release
		}
		return ids(p), nil
	}
	b.c.Start(context.Background())
	b.c.Add(b.req(1, time.Time{}))
	servicetest.Recv(t, b.drv.calls)
	for id := int64(2); id <= 6; id++ {
		b.c.Add(b.req(id, time.Time{}))
	}
	servicetest.None(t, b.drv.calls)
	close(release) // the write ends before Overflow: the clock never moves
	if p := servicetest.Recv(t, b.drv.calls); !slices.Equal(ids(p), []int64{2, 3, 4, 5, 6}) {
		t.Fatalf("second write %v, want tasks 2 to 6 in one", ids(p))
	}
	for range 6 {
		if d := servicetest.Recv(t, b.done); !d.applied {
			t.Fatalf("outcome %+v", d)
		}
	}
	servicetest.None(t, b.drv.calls)
}

func TestMaxBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{MaxBatch: 2})
	for id := int64(1); id <= 5; id++ {
		b.c.Add(b.req(id, time.Time{}))
	}
	b.c.Start(context.Background())
	var sizes []int
	for n := 0; n < 5; {
		p := servicetest.Recv(t, b.drv.calls)
		sizes = append(sizes, len(p.Transitions))
		n += len(p.Transitions)
	}
	slices.Sort(sizes) // the writers may finish in any order
	if !slices.Equal(sizes, []int{1, 2, 2}) {
		t.Fatalf("batch sizes %v, want [2 2 1]", sizes)
	}
}

// Defect 16: a database restart of a few seconds must not make a finished
// task wait for its lease to expire and run again. The write is retried,
// with backoff, for as long as the lease is ours.
func TestRetriesWhileLeaseHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{})
	const downFor = 5 * time.Second // longer than Patience (2s)
	b.drv.reply = func(_ int, p driver.FinishParams) ([]int64, error) {
		if p.Now.Before(t0.Add(downFor)) {
			return nil, errDown
		}
		return ids(p), nil
	}
	b.c.Start(context.Background())
	b.c.Add(b.req(1, t0.Add(30*time.Second)))

	var waits []time.Duration
	for {
		p := servicetest.Recv(t, b.drv.calls)
		if !p.Now.Before(t0.Add(downFor)) {
			break
		}
		waits = append(waits, b.clk.AdvanceToNext(t))
	}
	if d := servicetest.Recv(t, b.done); !d.applied || d.err != nil {
		t.Fatalf("outcome %+v, want applied once the database is back", d)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second, time.Second}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits between attempts %v, want doubling from 100ms capped at 1s: %v", waits, want)
	}
}

func TestGivesUpWhenLeaseRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{})
	b.drv.reply = func(int, driver.FinishParams) ([]int64, error) { return nil, errDown }
	// Queued before Start, so all three share the first batch.
	b.c.Add(b.req(1, t0.Add(1500*time.Millisecond)))
	b.c.Add(b.req(2, t0.Add(3*time.Second)))
	b.c.Add(b.req(3, t0.Add(-time.Second))) // lease already gone: tried once
	b.c.Start(context.Background())

	ms := time.Millisecond
	want := []struct {
		at  time.Duration
		ids []int64
	}{
		{0, []int64{1, 2, 3}}, {100 * ms, []int64{1, 2}}, {300 * ms, []int64{1, 2}}, {700 * ms, []int64{1, 2}},
		// The wait is cut short to try once more as task 1's lease ends.
		{1500 * ms, []int64{1, 2}}, {2500 * ms, []int64{2}}, {3000 * ms, []int64{2}},
	}
	for i, w := range want {
		p := servicetest.Recv(t, b.drv.calls)
		if !p.Now.Equal(t0.Add(w.at)) || !slices.Equal(ids(p), w.ids) {
			t.Fatalf("write %d finished %v at %v, want %v at %v", i, ids(p), p.Now.Sub(t0), w.ids, w.at)
		}
		if i < len(want)-1 {
			b.clk.AdvanceToNext(t)
		}
	}
	gaveUp := map[int64]time.Duration{}
	for range 3 {
		d := servicetest.Recv(t, b.done)
		if d.applied || !errors.Is(d.err, errDown) {
			t.Fatalf("task %d given up with %+v, want the database error", d.id, d)
		}
		gaveUp[d.id] = d.at.Sub(t0)
	}
	if gaveUp[3] != 0 || gaveUp[1] != 1500*ms || gaveUp[2] != 3*time.Second {
		t.Fatalf("given up at %v, want each at its lease expiry", gaveUp)
	}
	b.c.Stop()
	servicetest.None(t, b.drv.calls)
}

func TestNoLeaseRetriesForPatience(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{Patience: 700 * time.Millisecond})
	b.drv.reply = func(int, driver.FinishParams) ([]int64, error) { return nil, errDown }
	b.c.Start(context.Background())
	b.c.Add(b.req(1, time.Time{}))
	var attempts []time.Time
	for {
		p := servicetest.Recv(t, b.drv.calls)
		attempts = append(attempts, p.Now)
		// After a failed write the completer either gives up (done) or
		// waits on the clock to try again; it does one of them just after
		// the write returns, so wait for whichever comes (bounded).
		for deadline := time.Now().Add(10 * time.Second); len(b.done) == 0 && b.clk.Waiters() == 0; {
			if time.Now().After(deadline) {
				t.Fatal("the completer neither gave up nor waited to retry")
			}
			time.Sleep(time.Millisecond)
		}
		select {
		case d := <-b.done:
			if !errors.Is(d.err, errDown) {
				t.Fatalf("outcome %+v, want the database error", d)
			}
			want := []time.Time{t0, t0.Add(100 * time.Millisecond), t0.Add(300 * time.Millisecond), t0.Add(700 * time.Millisecond)}
			if !slices.EqualFunc(attempts, want, time.Time.Equal) {
				t.Fatalf("attempts at %v, want %v", attempts, want)
			}
			return
		default:
		}
		b.clk.AdvanceToNext(t)
	}
}

func TestStopDrains(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{})
	b.c.Start(context.Background())
	for id := int64(1); id <= 3; id++ {
		b.c.Add(b.req(id, time.Time{}))
	}
	b.c.Stop()
	// Stop returned: every outcome is stored and reported.
	for range 3 {
		select {
		case d := <-b.done:
			if !d.applied {
				t.Fatalf("task %d not applied", d.id)
			}
		default:
			t.Fatal("Stop returned before every queued task was written")
		}
	}
}

func TestStopWaitsForFailingWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{})
	b.drv.reply = func(call int, p driver.FinishParams) ([]int64, error) {
		if call < 3 {
			return nil, errDown
		}
		return ids(p), nil
	}
	b.c.Start(context.Background())
	b.c.Add(b.req(1, t0.Add(30*time.Second)))
	servicetest.Recv(t, b.drv.calls)
	stopped := make(chan struct{})
	go func() { b.c.Stop(); close(stopped) }()
	// The retry goes on after Stop, on its own context.
	b.clk.AdvanceToNext(t)
	servicetest.Recv(t, b.drv.calls)
	servicetest.None(t, stopped)
	b.clk.AdvanceToNext(t)
	servicetest.Recv(t, b.drv.calls)
	servicetest.Recv(t, stopped)
	if d := servicetest.Recv(t, b.done); !d.applied {
		t.Fatalf("outcome %+v, want applied on the third attempt", d)
	}
}

// TestNoOverflowWritesSideBySide: with a negative Overflow (a driver
// whose concurrent writes share one commit), what arrives during a write
// is written at once by another writer.
func TestNoOverflowWritesSideBySide(t *testing.T) {
	t.Parallel()
	b := setup(t, completer.Config{Overflow: -1})
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	b.drv.reply = func(call int, p driver.FinishParams) ([]int64, error) {
		if p.Transitions[0].ID == 1 {
			<-release
		}
		return ids(p), nil
	}
	b.c.Start(context.Background())
	b.c.Add(b.req(1, time.Time{}))
	servicetest.Recv(t, b.drv.calls)
	b.c.Add(b.req(2, time.Time{}))
	if p := servicetest.Recv(t, b.drv.calls); !slices.Equal(ids(p), []int64{2}) || !p.Now.Equal(t0) {
		t.Fatalf("second write %v at %v, want task 2 at once", ids(p), p.Now.Sub(t0))
	}
	unblock()
}
