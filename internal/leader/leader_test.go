package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/leader"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  leader.Lease = driver.Driver(nil) // the real drivers fit
	t0              = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const ttl = 30 * time.Second

// lease is a fake driver. Each Lead call is sent on calls, then waits for
// its answer on answers, so the test decides every campaign's outcome.
type lease struct {
	calls   chan driver.LeadParams
	answers chan answer
	resigns chan string
}

type answer struct {
	ok  bool
	err error
}

func (l *lease) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	l.calls <- p
	select {
	case a := <-l.answers:
		return a.ok, a.err
	case <-ctx.Done(): // Stop of a failed test
		return false, ctx.Err()
	}
}

func (l *lease) Resign(_ context.Context, name, owner string) error {
	l.resigns <- name + "/" + owner
	return nil
}

type bundle struct {
	clk    *servicetest.Clock
	drv    *lease
	e      *leader.Elector
	onLead chan time.Time
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{
		clk: servicetest.NewClock(t0),
		drv: &lease{calls: make(chan driver.LeadParams, 10), answers: make(chan answer, 10), resigns: make(chan string, 10)},
	}
	b.onLead = make(chan time.Time, 10)
	b.e = leader.New(leader.Config{
		Driver: b.drv, Owner: "node-1", TTL: ttl, Clock: b.clk,
		OnLead: func() { b.onLead <- b.clk.Now() },
	})
	return b
}

// campaign answers the next campaign with a and waits until the Elector
// has taken it in (its Leading reports it).
func (b *bundle) campaign(t *testing.T, a answer) driver.LeadParams {
	t.Helper()
	p := servicetest.Recv(t, b.drv.calls)
	b.drv.answers <- a
	want := a.ok && a.err == nil
	deadline := time.Now().Add(10 * time.Second)
	for b.e.Leading() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Leading() stayed %v after the campaign answered %+v", !want, a)
		}
		time.Sleep(time.Millisecond)
	}
	return p
}

func TestAcquireRenewLoseRegain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.e.Start(context.Background())
	defer b.e.Stop()

	// The first campaign runs at once and wins.
	p := b.campaign(t, answer{ok: true})
	if p.Name != leader.Name || p.Owner != "node-1" || p.TTL != ttl || !p.Now.Equal(t0) {
		t.Fatalf("campaign %+v, want %q for node-1 at t0 with the TTL", p, leader.Name)
	}
	if at := servicetest.Recv(t, b.onLead); !at.Equal(t0) {
		t.Fatalf("OnLead at %v, want at the winning campaign", at)
	}
	// Renewed every TTL/3; holding on is not a new leadership.
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(ttl / 3)
	if p := b.campaign(t, answer{ok: true}); !p.Now.Equal(t0.Add(ttl / 3)) {
		t.Fatalf("renewal at %v, want TTL/3 on", p.Now)
	}
	// Another process holds the lease: lost.
	b.clk.Advance(ttl / 3)
	b.campaign(t, answer{ok: false})
	// An error is not leading either.
	b.clk.Advance(ttl / 3)
	b.campaign(t, answer{ok: true, err: errors.New("connection refused")})
	servicetest.None(t, b.onLead)
	// Regained: OnLead again.
	b.clk.Advance(ttl / 3)
	b.campaign(t, answer{ok: true})
	if at := servicetest.Recv(t, b.onLead); !at.Equal(t0.Add(4 * ttl / 3)) {
		t.Fatalf("OnLead at %v, want at the regaining campaign", at)
	}
}

func TestStopResignsWhenLeading(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.e.Start(context.Background())
	b.campaign(t, answer{ok: true})
	b.e.Stop()
	if got := servicetest.Recv(t, b.drv.resigns); got != leader.Name+"/node-1" {
		t.Fatalf("resigned %q", got)
	}
	if b.e.Leading() {
		t.Fatal("still leading after Stop")
	}
	if n := b.clk.Waiters(); n != 0 {
		t.Fatalf("%d clock waiters after Stop", n)
	}
}

func TestStopDoesNotResignWhenFollowing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.e.Start(context.Background())
	b.campaign(t, answer{ok: false})
	b.e.Stop()
	servicetest.None(t, b.drv.resigns)
}
