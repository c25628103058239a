package nodes_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/nodes"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  nodes.Registry = driver.Driver(nil) // the real drivers fit
	t0                = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const (
	interval = 10 * time.Second
	ttl      = 30 * time.Second
)

// registry is a fake driver; every call is sent on its channel.
type registry struct {
	registers chan driver.NodeParams
	prunes    chan driver.PruneNodesParams
	removes   chan string
	failReg   atomic.Bool
}

func (r *registry) RegisterNode(_ context.Context, p driver.NodeParams) error {
	r.registers <- p
	if r.failReg.Load() {
		return errors.New("connection refused")
	}
	return nil
}

func (r *registry) RemoveNode(_ context.Context, name string) error {
	r.removes <- name
	return nil
}

func (r *registry) PruneNodes(_ context.Context, p driver.PruneNodesParams) (int64, error) {
	r.prunes <- p
	return 2, nil
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *registry
	leading atomic.Bool
	r       *nodes.Registrar
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{
		clk: servicetest.NewClock(t0),
		drv: &registry{registers: make(chan driver.NodeParams, 100), prunes: make(chan driver.PruneNodesParams, 100), removes: make(chan string, 10)},
	}
	b.r = nodes.New(nodes.Config{
		Driver:   b.drv,
		Node:     driver.NodeParams{Name: "node-1", Host: "host", PID: 42, Queues: []string{"a", "b"}, StartedAt: t0.Add(-time.Hour)},
		Interval: interval, LeaseTTL: ttl, Clock: b.clk,
		Leading: b.leading.Load,
	})
	return b
}

func TestRegisterRefreshRemove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.Start(context.Background())
	// Registered at once, then refreshed every interval with the new time.
	for i := range 3 {
		p := servicetest.Recv(t, b.drv.registers)
		now := t0.Add(time.Duration(i) * interval)
		if p.Name != "node-1" || p.Host != "host" || p.PID != 42 || !slices.Equal(p.Queues, []string{"a", "b"}) ||
			!p.StartedAt.Equal(t0.Add(-time.Hour)) || !p.Now.Equal(now) {
			t.Fatalf("registration %d = %+v, want node-1 at %v", i, p, now)
		}
		b.clk.WaitForWaiters(t, 1)
		b.clk.Advance(interval)
	}
	servicetest.Recv(t, b.drv.registers)
	b.r.Stop()
	if got := servicetest.Recv(t, b.drv.removes); got != "node-1" {
		t.Fatalf("removed %q, want node-1", got)
	}
	servicetest.None(t, b.drv.prunes) // never leading: never pruned
	if n := b.clk.Waiters(); n != 0 {
		t.Fatalf("%d clock waiters after Stop", n)
	}
}

func TestLeaderPrunes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading.Store(true)
	b.drv.failReg.Store(true) // a failed refresh does not skip the pruning
	b.r.Start(context.Background())
	defer b.r.Stop()
	servicetest.Recv(t, b.drv.registers)
	if p := servicetest.Recv(t, b.drv.prunes); !p.Now.Equal(t0) || p.OlderThan != nodes.StaleAfter*ttl {
		t.Fatalf("prune %+v, want nodes silent for %v at t0", p, nodes.StaleAfter*ttl)
	}
	b.leading.Store(false)
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(interval)
	servicetest.Recv(t, b.drv.registers)
	b.clk.Advance(interval)
	servicetest.Recv(t, b.drv.registers) // the second pass is over
	servicetest.None(t, b.drv.prunes)
}

func TestRunOnceAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading.Store(true)
	b.clk.Advance(time.Minute)
	b.r.RunOnce(context.Background())
	if p := servicetest.Recv(t, b.drv.registers); !p.Now.Equal(t0.Add(time.Minute)) {
		t.Fatalf("refresh at %v", p.Now)
	}
	servicetest.Recv(t, b.drv.prunes)
}
