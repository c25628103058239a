package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
)

// planNode is the part of EXPLAIN (FORMAT JSON) the plan tests read.
type planNode struct {
	Type      string     `json:"Node Type"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// TestPlansStayOnTheIndex: the claim, the rescuer's scan and the ETA count
// read their partial index as a range bounded by now, in index order, and
// the statements that go by id read the primary key, whatever the
// statistics say. Joined from a CTE, the bound used to make
// the scan the inner side of a nested loop; once VACUUM had given the table
// a row count but no column statistics, the planner sorted every ready task
// on each claim (110 ms instead of 2 ms per claim with 100,000 ready), and
// a drain fell from about 12,000 to 1,600 jobs/s.
func TestPlansStayOnTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	c, err := keel.NewClient(keel.Config{Driver: d, Types: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]keel.Job, 20000)
	for i := range jobs {
		jobs[i] = keel.Job{Type: "t", Payload: map[string]int{"n": i}}
	}
	if _, err := c.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// Some of them running, as in a live system.
	now := time.Now()
	rows, err := d.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 100, Owner: "w", Now: now,
		LeaseExpiresAt: now.Add(30 * time.Second)})
	if err != nil || len(rows) != 100 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}

	idList, fenceList := make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		idList[i], fenceList[i] = fmt.Sprint(r.ID), fmt.Sprint(r.Fence)
	}
	ids := "'{" + strings.Join(idList, ",") + "}'"
	fences := "'{" + strings.Join(fenceList, ",") + "}'"

	statements := []struct {
		name, sql, types, args, index, cond string
		// The rescuer may sort what it reads: only expired leases.
		sortOK bool
	}{
		{"claim", d.ClaimSQL(), "timestamptz, text, integer, text, bigint", "NULL, 'default', 100, 'w', 30000000",
			"keel_tasks_claim", "run_at <=", false},
		{"expired", d.ExpiredSQL(), "timestamptz, integer", "NULL, 100",
			"keel_tasks_lease", "lease_expires_at <", true},
		{"count ahead", d.CountAheadSQL(), "timestamptz, text, integer, timestamptz, bigint", "NULL, 'default', 0, now(), 1",
			"keel_tasks_claim", "run_at <=", false},
		// Statements that go by id read the primary key, not every running
		// task through the lease index.
		{"finish a batch", d.SucceedManySQL(), "timestamptz, bigint[], bigint[], text", "NULL, " + ids + ", " + fences + ", 'w'",
			"keel_tasks_pkey", "id =", false},
		{"transition", d.TransitionSQL(), "timestamptz, text, bigint, text, integer, text, bigint, bigint, text",
			fmt.Sprintf("NULL, 'pending', 1000, NULL, 0, NULL, %d, %d, 'w'", rows[0].ID, rows[0].Fence),
			"keel_tasks_pkey", "id =", false},
		{"heartbeat", d.HeartbeatSQL(), "timestamptz, bigint, bigint[], text", "NULL, 30000000, " + ids + ", 'w'",
			"keel_tasks_pkey", "id =", false},
	}
	// After VACUUM the table has a row count but no column statistics (the
	// state the bad plan needed); after ANALYZE it has both.
	for _, maintenance := range []string{"VACUUM", "ANALYZE"} {
		if _, err := pool.Exec(ctx, maintenance+" "+d.Schema()+".keel_tasks"); err != nil {
			t.Fatal(err)
		}
		for _, st := range statements {
			for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
				plan := explain(t, ctx, d.Schema(), st.sql, st.types, st.args, mode)
				var sorted, onIndex bool
				plan.walk(func(n planNode) {
					if n.Type == "Sort" || n.Type == "Incremental Sort" {
						sorted = true
					}
					if n.Index == st.index && strings.Contains(n.IndexCond, st.cond) {
						onIndex = true
					}
				})
				if (sorted && !st.sortOK) || !onIndex {
					b, _ := json.MarshalIndent(plan, "", "  ")
					t.Errorf("after %s, %s (%s): want %s read with %q (sorted: %v), got\n%s",
						maintenance, st.name, mode, st.index, st.cond, sorted, b)
				}
			}
		}
	}
}

// explain returns the plan of sql prepared with the given parameter types
// and run with args under plan_cache_mode mode.
func explain(t *testing.T, ctx context.Context, schema, sql, types, args, mode string) planNode {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "PREPARE keel_plan_test("+types+") AS "+sql); err != nil {
		t.Fatalf("prepare: %v\n%s", err, sql)
	}
	// A prepared statement belongs to the session, not the transaction.
	defer conn.Exec(ctx, "DEALLOCATE keel_plan_test") //nolint:errcheck // the connection is discarded on error
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE keel_plan_test("+args+")").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("explain output %s: %v", raw, err)
	}
	return out[0].Plan
}
