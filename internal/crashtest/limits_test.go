package crashtest

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

// limitedType is the task type of the cluster-wide limit scenario.
const limitedType = "crash.limited"

// newLimitedWorker returns a client whose handler runs limitedType's tasks
// for delay and records each run's interval (start and end, Unix
// nanoseconds of this machine's clock, shared by every process) in the
// runs table, before the task's outcome is stored: the intervals lie
// within the tasks' running time in the database.
func newLimitedWorker(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) (*keel.Client, error) {
	insert := b.rebind(`INSERT INTO runs (task_id, node, start_ns, end_ns) VALUES (?, ?, ?, ?)`)
	h := keel.NewHandlers()
	keel.Handle(h, limitedType, func(ctx context.Context, task *keel.Task[job]) error {
		start := time.Now().UnixNano()
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := db.ExecContext(ctx, insert, task.ID, node, start, time.Now().UnixNano())
		return err
	})
	return keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Node: node,
		Queues:   map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 1}},
		LeaseTTL: leaseTTL, HeartbeatInterval: heartbeatInterval, RescueInterval: rescueInterval,
		PollInterval: pollInterval, SettingsInterval: 500 * time.Millisecond,
		MaxAttempts: 100, Timeout: 30 * time.Second, TimeoutGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// clusterLimit: a type with a cluster-wide concurrency of 2 is worked by
// three worker processes of one worker each, which could run 3 at once
// without the limit, and only reach 2 by sharing it. The handlers'
// recorded run intervals never overlap more than 2 at a time, and 2 is
// reached. (With many workers per process, the process that frees a slot
// tends to take it again at once while the others find it at their next
// poll, so which processes run the tasks is up to timing.)
func clusterLimit(t *testing.T, b *backend) {
	e := setup(t, b)
	if _, err := e.db.ExecContext(e.ctx, b.runsDDL()); err != nil {
		t.Fatalf("create the runs table: %v", err)
	}
	if _, err := e.client.UpdateType(e.ctx, limitedType, keel.TypeUpdate{Concurrency: new(2)}); err != nil {
		t.Fatal(err)
	}
	const total = 80
	c, err := keel.NewClient(keel.Config{Driver: e.drv, Types: []string{limitedType}})
	if err != nil {
		t.Fatal(err)
	}
	// Every worker runs before the first task is there, so that all three
	// compete for the two slots from the start.
	for i := range 3 {
		e.startLimitedWorker(fmt.Sprintf("w%d", i+1), 40*time.Millisecond)
	}
	jobs := make([]keel.TaskSpec, total)
	for i := range jobs {
		jobs[i] = keel.TaskSpec{Type: limitedType, Payload: job{N: i}}
	}
	if _, err := c.EnqueueMany(e.ctx, jobs); err != nil {
		t.Fatal(err)
	}
	e.waitAllSucceeded(total, 60*time.Second+slack)
	rows, err := e.db.QueryContext(e.ctx, `SELECT start_ns, end_ns, node FROM runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	nodes := map[string]int{}
	for rows.Next() {
		var start, end int64
		var node string
		if err := rows.Scan(&start, &end, &node); err != nil {
			t.Fatal(err)
		}
		edges = append(edges, edge{start, 1}, edge{end, -1})
		nodes[node]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(edges) != 2*total {
		t.Fatalf("%d runs recorded, want %d", len(edges)/2, total)
	}
	// Ends before starts at one instant: touching intervals do not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(min(max(a.at-b.at, -1), 1))
		}
		return a.delta - b.delta
	})
	peak, cur := 0, 0
	for _, ed := range edges {
		cur += ed.delta
		peak = max(peak, cur)
	}
	t.Logf("runs by node %v, at most %d at once", nodes, peak)
	if len(nodes) < 2 {
		t.Errorf("only %v ran the tasks: the limit was not shared between processes", nodes)
	}
	if peak != 2 {
		t.Fatalf("at most %d tasks ran at once across three worker processes with the type's concurrency 2, want exactly 2", peak)
	}
}

// runsDDL creates the table the limited handler records its runs in.
func (b *backend) runsDDL() string {
	return `CREATE TABLE runs (task_id BIGINT NOT NULL, node VARCHAR(255) NOT NULL, start_ns BIGINT NOT NULL, end_ns BIGINT NOT NULL)`
}

// startLimitedWorker starts a worker process of the limit scenario.
func (e *env) startLimitedWorker(node string, delay time.Duration) *worker {
	e.t.Helper()
	return proctest.Start(e.t, node, e.helperCmd("limited", node, delay))
}
