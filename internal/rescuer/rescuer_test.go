package rescuer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/leader"
	"github.com/keelq/keel/internal/rescuer"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  rescuer.Store = driver.Driver(nil) // the real drivers fit
	t0               = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const interval = 10 * time.Second

// store is a fake driver: each ListExpired call is sent on calls and
// answered by reply (default: nothing expired); each Rescue call is sent
// on rescues and applies every transition it is given.
type store struct {
	calls   chan driver.ExpiredParams
	rescues chan driver.RescueParams
	reply   func(call int) ([]driver.TaskRow, error)
	n       int  // only the rescuer's goroutine touches it
	renewed bool // Rescue applies nothing: every lease was renewed meanwhile
}

func (s *store) ListExpired(_ context.Context, p driver.ExpiredParams) ([]driver.TaskRow, time.Time, error) {
	s.n++
	s.calls <- p
	if s.reply == nil {
		return nil, p.Now, nil
	}
	rows, err := s.reply(s.n)
	return rows, p.Now, err
}

func (s *store) Rescue(_ context.Context, p driver.RescueParams) ([]driver.TaskRow, error) {
	s.rescues <- p
	if s.renewed {
		return nil, nil
	}
	out := make([]driver.TaskRow, len(p.Tasks))
	for i, rt := range p.Tasks {
		out[i] = driver.TaskRow{ID: rt.Transition.ID, Queue: "default", State: rt.Transition.State, RunAt: rt.Transition.RunAt}
	}
	return out, nil
}

// rows are n expired tasks lost by node-0.
func rows(n int) []driver.TaskRow {
	out := make([]driver.TaskRow, n)
	for i := range out {
		out[i] = driver.TaskRow{ID: int64(i + 1), Fence: int64(i + 100), Queue: "default", State: driver.StateRunning, LeaseOwner: "node-0"}
	}
	return out
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *store
	leading atomic.Bool
	checks  chan bool // every Leading() answer
	rescued chan int  // rows per Rescued call
	cfg     rescuer.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{
		clk:     servicetest.NewClock(t0),
		drv:     &store{calls: make(chan driver.ExpiredParams, 100), rescues: make(chan driver.RescueParams, 100)},
		checks:  make(chan bool, 100),
		rescued: make(chan int, 100),
	}
	b.cfg = rescuer.Config{
		Driver: b.drv, Node: "node-1", Interval: interval, Clock: b.clk,
		Decide: func(row *driver.TaskRow, now time.Time) driver.Transition {
			return driver.Transition{ID: row.ID, Fence: row.Fence, State: driver.StatePending, RunAt: now.Add(time.Minute)}
		},
		Leading: func() bool {
			v := b.leading.Load()
			b.checks <- v
			return v
		},
		Rescued: func(rows []driver.TaskRow) { b.rescued <- len(rows) },
	}
	return b
}

func (b *bundle) start(t *testing.T) *rescuer.Rescuer {
	t.Helper()
	r := rescuer.New(b.cfg)
	r.Start(context.Background())
	t.Cleanup(r.Stop)
	return r
}

func TestNotLeadingDoesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t)
	if servicetest.Recv(t, b.checks) {
		t.Fatal("leading")
	}
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(interval)
	servicetest.Recv(t, b.checks) // the first pass is over
	servicetest.None(t, b.drv.calls)
}

func TestPagesThroughBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading.Store(true)
	b.drv.reply = func(call int) ([]driver.TaskRow, error) {
		switch call {
		case 1, 2:
			return rows(rescuer.BatchSize), nil
		case 3:
			return rows(3), nil
		}
		return nil, nil
	}
	b.start(t)
	// The first pass runs at once and pages until a batch is short.
	for i := 1; i <= 3; i++ {
		p := servicetest.Recv(t, b.drv.calls)
		if p.Limit != rescuer.BatchSize || !p.Now.Equal(t0) {
			t.Fatalf("call %d = %+v", i, p)
		}
		// Each listed task is written as Decide says, fenced by its lost
		// owner and fence, as of the instant the listing judged by.
		rp := servicetest.Recv(t, b.drv.rescues)
		rt := rp.Tasks[len(rp.Tasks)-1]
		if !rp.Now.Equal(t0) || rt.Owner != "node-0" || rt.Transition.Fence != rt.Transition.ID+99 ||
			!rt.Transition.RunAt.Equal(t0.Add(time.Minute)) || rt.Transition.State != driver.StatePending {
			t.Fatalf("rescue %d = now %v, %+v", i, rp.Now, rt)
		}
	}
	for _, want := range []int{rescuer.BatchSize, rescuer.BatchSize, 3} {
		if got := servicetest.Recv(t, b.rescued); got != want {
			t.Fatalf("Rescued told of %d rows, want %d", got, want)
		}
	}
	servicetest.Recv(t, b.checks)
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(interval)
	servicetest.Recv(t, b.checks)
	if p := servicetest.Recv(t, b.drv.calls); !p.Now.Equal(t0.Add(interval)) {
		t.Fatalf("second pass at %v, want one interval on", p.Now)
	}
	b.clk.Advance(interval)
	servicetest.Recv(t, b.checks) // the second pass is over
	servicetest.Recv(t, b.drv.calls)
	servicetest.None(t, b.rescued) // nothing expired: Rescued not called
}

// A full batch of expired tasks that all got renewed before the write
// would be listed again and again: the pass ends instead of spinning.
func TestNoProgressEndsPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading.Store(true)
	b.drv.renewed = true
	b.drv.reply = func(int) ([]driver.TaskRow, error) { return rows(rescuer.BatchSize), nil }
	b.start(t)
	servicetest.Recv(t, b.drv.calls)
	servicetest.Recv(t, b.drv.rescues)
	servicetest.Recv(t, b.checks)
	b.clk.WaitForWaiters(t, 1)
	servicetest.None(t, b.drv.calls)
	servicetest.None(t, b.rescued)
}

func TestErrorEndsPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading.Store(true)
	b.drv.reply = func(call int) ([]driver.TaskRow, error) {
		if call == 1 {
			return nil, errors.New("connection refused")
		}
		return rows(1), nil
	}
	b.start(t)
	servicetest.Recv(t, b.drv.calls)
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(interval)
	servicetest.Recv(t, b.checks)
	servicetest.Recv(t, b.checks) // second pass started: the first made one call
	servicetest.Recv(t, b.drv.calls)
	if n := servicetest.Recv(t, b.rescued); n != 1 {
		t.Fatalf("rescued %d", n)
	}
	servicetest.None(t, b.drv.calls)
}

func TestKickRunsPassNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.start(t)
	servicetest.Recv(t, b.checks) // not leading yet
	b.leading.Store(true)
	r.Kick()
	if p := servicetest.Recv(t, b.drv.calls); !p.Now.Equal(t0) {
		t.Fatalf("pass at %v, want at once", p.Now)
	}
}

// Defect 16: a process that becomes leader rescues at once, not a whole
// rescue interval later. Wired as the engine wires them: the elector's
// OnLead kicks the rescuer.
func TestFirstPassWhenLeadershipGained(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var r *rescuer.Rescuer
	e := leader.New(leader.Config{
		Driver: grant{}, Owner: "node-1", TTL: 30 * time.Second, Clock: b.clk,
		OnLead: func() { r.Kick() },
	})
	leading := b.cfg.Leading
	b.cfg.Leading = func() bool { b.leading.Store(e.Leading()); return leading() }
	r = b.start(t)
	if servicetest.Recv(t, b.checks) {
		t.Fatal("leading before the elector started")
	}
	e.Start(context.Background())
	defer e.Stop()
	if p := servicetest.Recv(t, b.drv.calls); !p.Now.Equal(t0) {
		t.Fatalf("first rescue at %v, want at once on gaining leadership", p.Now)
	}
}

// grant is a lease every campaign wins.
type grant struct{}

func (grant) Lead(context.Context, driver.LeadParams) (bool, error) { return true, nil }
func (grant) Resign(context.Context, string, string) error          { return nil }
