package heartbeat_test

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
	"github.com/keelq/keel/internal/heartbeat"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  heartbeat.Renewer = driver.Driver(nil) // the real drivers fit
	t0                   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const (
	interval = 10 * time.Second
	ttl      = 30 * time.Second
)

// renewer is a fake driver: each call is sent on calls and answered by
// the next reply (held ids, or an error).
type renewer struct {
	clk     *servicetest.Clock
	calls   chan driver.HeartbeatParams
	mu      sync.Mutex
	replies []reply
}

// reply answers one renewal; reply{} renews every lease.
type reply struct {
	held []int64
	err  error
	took time.Duration // the clock advances this much during the call
}

func (r *renewer) Heartbeat(_ context.Context, p driver.HeartbeatParams) ([]int64, error) {
	r.mu.Lock()
	rep := reply{held: p.IDs}
	if len(r.replies) > 0 {
		rep, r.replies = r.replies[0], r.replies[1:]
	}
	r.mu.Unlock()
	if rep.err == nil && rep.held == nil {
		rep.held = p.IDs // reply{}: every lease renewed
	}
	if rep.took > 0 {
		r.clk.Advance(rep.took)
	}
	r.calls <- p
	return rep.held, rep.err
}

type lost struct {
	ids []int64
	all bool
	at  time.Time // the clock when Lost was called
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *renewer
	hb      *heartbeat.Heartbeat
	lost    chan lost
	mu      sync.Mutex
	running []int64
}

func setup(t *testing.T, replies ...reply) *bundle {
	t.Helper()
	return setupLogged(t, nil, replies...)
}

func setupLogged(t *testing.T, log *slog.Logger, replies ...reply) *bundle {
	t.Helper()
	return setupTTL(t, log, ttl, replies...)
}

// setupTTL is setupLogged with leases of leaseTTL.
func setupTTL(t *testing.T, log *slog.Logger, leaseTTL time.Duration, replies ...reply) *bundle {
	t.Helper()
	clk := servicetest.NewClock(t0)
	b := &bundle{
		clk:  clk,
		drv:  &renewer{clk: clk, calls: make(chan driver.HeartbeatParams, 100), replies: replies},
		lost: make(chan lost, 100),
	}
	b.hb = heartbeat.New(heartbeat.Config{
		Driver: b.drv, Owner: "node-1", Interval: interval, LeaseTTL: leaseTTL, Clock: b.clk, Logger: log,
		Running: func() []int64 {
			b.mu.Lock()
			defer b.mu.Unlock()
			return slices.Clone(b.running)
		},
		Lost: func(ids []int64, all bool) { b.lost <- lost{ids, all, b.clk.Now()} },
	})
	b.hb.Start(context.Background())
	t.Cleanup(b.hb.Stop)
	b.clk.WaitForWaiters(t, 1)
	return b
}

func (b *bundle) setRunning(ids ...int64) {
	b.mu.Lock()
	b.running = ids
	b.mu.Unlock()
}

// tick moves the clock one interval and returns the renewal it caused.
func (b *bundle) tick(t *testing.T) driver.HeartbeatParams {
	t.Helper()
	b.clk.Advance(interval)
	return servicetest.Recv(t, b.drv.calls)
}

func TestRenewsEveryInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setRunning(1, 2, 3)
	servicetest.None(t, b.drv.calls) // nothing before the first interval
	for i := 1; i <= 3; i++ {
		p := b.tick(t)
		now := t0.Add(time.Duration(i) * interval)
		if p.Owner != "node-1" || !slices.Equal(p.IDs, []int64{1, 2, 3}) || !p.Now.Equal(now) || !p.LeaseExpiresAt.Equal(now.Add(ttl)) {
			t.Fatalf("renewal %d = %+v, want ids 1-3 until %v", i, p, now.Add(ttl))
		}
	}
	b.setRunning(2)
	b.tick(t) // the third renewal has been handled: nothing was lost
	servicetest.None(t, b.lost)
	// The lease is known to last until the last renewal's expiry, or the
	// claim's when that is later (claimed after the renewal).
	// The fake driver answered the fourth renewal when tick returned; the
	// heartbeat records it just after, so wait for it (bounded).
	renewed := t0.Add(4*interval + ttl)
	deadline := time.Now().Add(5 * time.Second)
	for got := b.hb.LeaseExpiresAt(2, t0.Add(ttl)); !got.Equal(renewed); got = b.hb.LeaseExpiresAt(2, t0.Add(ttl)) {
		if time.Now().After(deadline) {
			t.Fatalf("LeaseExpiresAt after renewal = %v, want %v", got, renewed)
		}
		time.Sleep(time.Millisecond)
	}
	if got := b.hb.LeaseExpiresAt(1, t0.Add(ttl)); !got.Equal(t0.Add(ttl)) {
		t.Fatalf("LeaseExpiresAt of a task no longer renewed = %v, want its claim's", got)
	}
	later := renewed.Add(time.Second)
	if got := b.hb.LeaseExpiresAt(2, later); !got.Equal(later) {
		t.Fatalf("LeaseExpiresAt of a later claim = %v, want %v", got, later)
	}
	if got := b.hb.LeaseExpiresAt(9, t0); !got.Equal(t0) {
		t.Fatalf("LeaseExpiresAt of a task never renewed = %v, want its claim's", got)
	}
}

// TestSlowRenewalWarns: a renewal that takes more than half of the
// leases' margin (lease TTL minus interval: 14s here) is a lease too short
// for the database's write latency, and is said so, once a minute. Every
// renewal takes less than the interval and the test moves the clock to
// the next tick exactly, so each beat starts on a tick of the test's and
// no renewal's time runs past the next one (which would start a beat the
// test did not ask for).
func TestSlowRenewalWarns(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	b := setupTTL(t, log, 24*time.Second, reply{took: 6 * time.Second}, reply{took: 8 * time.Second}, reply{took: 9 * time.Second},
		reply{}, reply{}, reply{}, reply{}, reply{took: 9500 * time.Millisecond})
	b.setRunning(1)
	beats := 0
	tick := func() {
		beats++
		b.clk.Advance(t0.Add(time.Duration(beats) * interval).Sub(b.clk.Now()))
		p := servicetest.Recv(t, b.drv.calls)
		// The beat judges its latency when the renewal returns, then
		// records the new expiry: wait for that before moving the clock
		// again, or the next move is counted in this renewal's time.
		deadline := time.Now().Add(5 * time.Second)
		for !b.hb.LeaseExpiresAt(1, t0).Equal(p.LeaseExpiresAt) {
			if time.Now().After(deadline) {
				t.Fatalf("beat %d: the renewal until %v was not recorded", beats, p.LeaseExpiresAt)
			}
			time.Sleep(time.Millisecond)
		}
	}
	tick() // at 10s, 6s of 14s: fine
	tick() // at 20s, 8s: warns
	tick() // at 30s, 9s, within the minute: already said
	for range 4 {
		tick()
	}
	tick() // at 80s, 9.5s: more than a minute after the first warning
	b.hb.Stop()
	out := logs.String()
	if n := strings.Count(out, "lease renewal slow"); n != 2 || !strings.Contains(out, "took 8s of the 14s") ||
		!strings.Contains(out, "took 9.5s of the 14s") || !strings.Contains(out, "raise the lease TTL") {
		t.Fatalf("want two warnings, for 8s and 9.5s; logged:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNothingRunningNoWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clk.Advance(interval)
	b.clk.Advance(interval)
	b.setRunning(7)
	if p := b.tick(t); !slices.Equal(p.IDs, []int64{7}) {
		t.Fatalf("first write renewed %v, want [7]: the idle ticks must not write", p.IDs)
	}
}

func TestPartialLoss(t *testing.T) {
	t.Parallel()
	b := setup(t, reply{held: []int64{1, 3}})
	b.setRunning(1, 2, 3)
	b.tick(t)
	if l := servicetest.Recv(t, b.lost); l.all || !slices.Equal(l.ids, []int64{2}) {
		t.Fatalf("lost %+v, want task 2 alone", l)
	}
	// The lost task's lease is no longer extended by the renewal.
	claimed := t0.Add(ttl)
	if got := b.hb.LeaseExpiresAt(2, claimed); !got.Equal(claimed) {
		t.Fatalf("LeaseExpiresAt of the lost task = %v, want only its claim's %v", got, claimed)
	}
	if got := b.hb.LeaseExpiresAt(3, claimed); !got.Equal(t0.Add(interval + ttl)) {
		t.Fatalf("LeaseExpiresAt of a held task = %v", got)
	}
}

func TestTotalLoss(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	b := setup(t, reply{}, reply{err: down}, reply{err: down}, reply{err: down}, reply{})
	b.setRunning(1, 2)
	b.tick(t) // renewed at 10s: the leases run until 40s
	b.tick(t) // 20s fails: the next try (30s) is still in time
	b.tick(t) // 30s fails: the next try (40s) would come too late
	// Handlers must stop before the leases run out at 40s, at the last
	// failed renewal before then: not at 20s, and not at 40s.
	if l := servicetest.Recv(t, b.lost); !l.all || l.ids != nil || !l.at.Equal(t0.Add(3*interval)) {
		t.Fatalf("lost %+v, want all at 30s", l)
	}
	b.tick(t) // 40s fails again: still lost
	if l := servicetest.Recv(t, b.lost); !l.all {
		t.Fatalf("lost %+v, want all", l)
	}
	b.tick(t) // 50s: the database is back; nothing more is reported
	b.tick(t)
	servicetest.None(t, b.lost)
	// A failed renewal extends nothing. The last renewal is recorded just
	// after the fake driver answered it: wait for it (bounded).
	want := t0.Add(6*interval + ttl)
	deadline := time.Now().Add(5 * time.Second)
	for got := b.hb.LeaseExpiresAt(1, time.Time{}); !got.Equal(want); got = b.hb.LeaseExpiresAt(1, time.Time{}) {
		if time.Now().After(deadline) {
			t.Fatalf("LeaseExpiresAt = %v, want the last successful renewal's, %v", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStopEndsRenewals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setRunning(1)
	b.tick(t)
	b.hb.Stop()
	if n := b.clk.Waiters(); n != 0 {
		t.Fatalf("%d clock waiters after Stop: the ticker still runs", n)
	}
}
