package drivertest

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// The node registry: RegisterNode, ListNodes, RemoveNode, PruneNodes, and
// the engine's use of them (Client.Start registers, Stop removes, the
// leader prunes nodes silent for three lease TTLs).

func (e *env) nodes() []driver.NodeRow {
	e.t.Helper()
	rows, err := e.drv.ListNodes(e.ctx)
	if err != nil {
		e.t.Fatalf("list nodes: %v", err)
	}
	return rows
}

func (e *env) registerNode(p driver.NodeParams) {
	e.t.Helper()
	if err := e.drv.RegisterNode(e.ctx, p); err != nil {
		e.t.Fatalf("register node %s: %v", p.Name, err)
	}
}

func nodeNames(rows []driver.NodeRow) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

func checkNode(t *testing.T, got driver.NodeRow, want driver.NodeParams) {
	t.Helper()
	queues := want.Queues
	if queues == nil {
		queues = []string{}
	}
	if got.Name != want.Name || got.Host != want.Host || got.PID != want.PID || !slices.Equal(got.Queues, queues) ||
		!got.StartedAt.Equal(want.StartedAt) || !got.HeartbeatAt.Equal(want.Now) || len(got.Workers) != len(want.Workers) ||
		!maps.Equal(got.Workers, want.Workers) && len(want.Workers) > 0 || got.Version != want.Version || got.Running != want.Running {
		t.Fatalf("node\n got %+v\nwant %+v (heartbeat at Now)", got, want)
	}
}

func testNodeRegistry(t *testing.T, e *env) {
	if got := e.nodes(); len(got) != 0 {
		t.Fatalf("fresh database lists nodes %v", nodeNames(got))
	}
	t0 := e.clock.Now()
	b := driver.NodeParams{Name: "node-b", Host: "host-2", PID: 22, Queues: []string{"default", "mail"}, StartedAt: t0, Now: t0,
		Workers: map[string]int{"default": 10, "mail": 2}, Version: "v1.2.3", Running: 7}
	a := driver.NodeParams{Name: "node-a", Host: "host-1", PID: 11, StartedAt: t0.Add(-time.Minute), Now: t0}
	e.registerNode(b)
	e.registerNode(a)
	got := e.nodes()
	if len(got) != 2 {
		t.Fatalf("nodes %v, want node-a and node-b", nodeNames(got))
	}
	checkNode(t, got[0], a) // ordered by name
	checkNode(t, got[1], b)

	// A refresh updates the row in place: one row per name.
	t1 := e.clock.Advance(5 * time.Second)
	b.Now, b.Queues, b.PID, b.Workers, b.Running = t1, []string{"mail"}, 23, map[string]int{"mail": 4}, 0
	e.registerNode(b)
	got = e.nodes()
	if len(got) != 2 {
		t.Fatalf("after refresh: nodes %v, want node-a and node-b", nodeNames(got))
	}
	checkNode(t, got[0], a)
	checkNode(t, got[1], b)

	if err := e.drv.RemoveNode(e.ctx, "node-a"); err != nil {
		t.Fatalf("remove node: %v", err)
	}
	if err := e.drv.RemoveNode(e.ctx, "node-a"); err != nil {
		t.Fatalf("remove a missing node: %v, want no error", err)
	}
	if got := nodeNames(e.nodes()); !slices.Equal(got, []string{"node-b"}) {
		t.Fatalf("after remove: nodes %v, want [node-b]", got)
	}
}

func testPruneNodes(t *testing.T, e *env) {
	t0 := e.clock.Now()
	for i, name := range []string{"old", "edge", "fresh"} {
		at := t0.Add(time.Duration(i) * 5 * time.Second) // old t0, edge t0+5s, fresh t0+10s
		e.registerNode(driver.NodeParams{Name: name, Host: "h", PID: i + 1, StartedAt: t0, Now: at})
	}
	prune := func(now time.Time, olderThan time.Duration) int64 {
		t.Helper()
		n, err := e.drv.PruneNodes(e.ctx, driver.PruneNodesParams{Now: now, OlderThan: olderThan})
		if err != nil {
			t.Fatalf("prune nodes: %v", err)
		}
		return n
	}
	// The cutoff is t0+5s: strictly older heartbeats go, the edge stays.
	if n := prune(t0.Add(12*time.Second), 7*time.Second); n != 1 {
		t.Fatalf("pruned %d nodes, want 1", n)
	}
	if got := nodeNames(e.nodes()); !slices.Equal(got, []string{"edge", "fresh"}) {
		t.Fatalf("after prune: nodes %v, want [edge fresh]", got)
	}
	if n := prune(t0.Add(12*time.Second), 7*time.Second); n != 0 {
		t.Fatalf("second prune removed %d nodes, want 0", n)
	}
	if n := prune(t0.Add(time.Hour), time.Minute); n != 2 {
		t.Fatalf("pruned %d nodes, want 2", n)
	}
	if got := e.nodes(); len(got) != 0 {
		t.Fatalf("nodes %v left after pruning all", nodeNames(got))
	}
}

// testEngineNodes: a started client registers itself with its queues, a
// graceful Stop removes it, and the leader prunes nodes whose heartbeat is
// older than three lease TTLs while keeping younger ones.
func testEngineNodes(t *testing.T, e *env) {
	now := e.clock.Now()
	ttl := time.Hour // the fake clock stands still: only its relation to the ghosts' heartbeats matters
	e.registerNode(driver.NodeParams{Name: "ghost", Host: "gone", PID: 1, StartedAt: now.Add(-5 * ttl), Now: now.Add(-3*ttl - time.Second)})
	e.registerNode(driver.NodeParams{Name: "quiet", Host: "slow", PID: 2, StartedAt: now.Add(-5 * ttl), Now: now.Add(-3 * ttl)})
	noop := func(context.Context, *keel.Task[args]) error { return nil }
	cfg := func(node string, queues ...string) keel.Config {
		qs := map[string]keel.QueueConfig{}
		for _, q := range queues {
			qs[q] = keel.QueueConfig{}
		}
		return keel.Config{Node: node, Queues: qs, LeaseTTL: ttl, HeartbeatInterval: 10 * time.Millisecond, Version: "v9.9.9-test"}
	}
	a := e.worker(cfg("worker-a", "default"), noop)
	e.worker(cfg("worker-b", "mail", "default"), noop)
	waitFor(t, "the ghost node to be pruned and both workers registered", func() bool {
		return slices.Equal(nodeNames(e.nodes()), []string{"quiet", "worker-a", "worker-b"})
	})
	infos, err := a.Nodes(e.ctx)
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	if len(infos) != 3 {
		t.Fatalf("Nodes returned %d nodes, want 3", len(infos))
	}
	for _, n := range infos[1:] {
		// Every started client also works keel's own queue (alert
		// deliveries, the drill).
		wantQueues := []string{"default", "keel"}
		if n.Name == "worker-b" {
			wantQueues = []string{"default", "keel", "mail"}
		}
		if n.PID <= 0 || n.Host == "" || !slices.Equal(n.Queues, wantQueues) || !n.StartedAt.Equal(now) || !n.HeartbeatAt.Equal(now) ||
			n.Version != "v9.9.9-test" || n.Running != 0 {
			t.Fatalf("node %+v: want a pid, a host, queues %v, started and heartbeat at %v", n, wantQueues, now)
		}
	}
	e.stop(a)
	if got := nodeNames(e.nodes()); !slices.Equal(got, []string{"quiet", "worker-b"}) {
		t.Fatalf("after worker-a stopped: nodes %v, want [quiet worker-b]", got)
	}
	// An enqueue-only client lists nodes too.
	infos, err = e.enqueuer().Nodes(e.ctx)
	if err != nil || len(infos) != 2 {
		t.Fatalf("Nodes from an enqueue-only client: %d nodes, %v; want 2", len(infos), err)
	}
}

// testEngineNodeRunning: a node's registry row counts the tasks it runs,
// refreshed with its heartbeat.
func testEngineNodeRunning(t *testing.T, e *env) {
	release := make(chan struct{})
	block := func(ctx context.Context, _ *keel.Task[args]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	c := e.worker(keel.Config{Node: "busy", HeartbeatInterval: 10 * time.Millisecond}, block)
	defer close(release)
	e.enqueue(c, 1)
	e.enqueue(c, 2)
	waitFor(t, "the registry to show two running tasks", func() bool {
		ns := e.nodes()
		return len(ns) == 1 && ns[0].Running == 2
	})
}
