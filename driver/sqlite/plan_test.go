package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

// TestListPlansUseAnIndex: List by type or queue reads that column's
// index in id order, by dead or cancelled state the partial index of
// failed tasks (the query states its predicate in words SQLite can match:
// it cannot from a bound parameter), by running state the lease index,
// and none of them but the running tasks is sorted: the
// dashboard's task lists on a table of millions.
func TestListPlansUseAnIndex(t *testing.T) {
	t.Parallel()
	d := open(t)
	for _, c := range []struct {
		name, index string
		f           driver.Filter
	}{
		{"dead", "keel_tasks_failed", driver.Filter{State: driver.StateDead}},
		{"cancelled", "keel_tasks_failed", driver.Filter{State: driver.StateCancelled}},
		{"running", "keel_tasks_lease", driver.Filter{State: driver.StateRunning}},
	} {
		c.f.Limit = 51
		q, args := d.ListSQL(c.f)
		all := queryPlan(t, d, q, args...)
		// The running tasks, however few, are sorted.
		sorted := strings.Contains(all, "TEMP B-TREE") && c.f.State != driver.StateRunning
		if sorted || !strings.Contains(all, "INDEX "+c.index+" ") {
			t.Errorf("List by %s: want a read of %s in order, got %s", c.name, c.index, all)
		} else {
			t.Logf("List by %s: %s", c.name, all)
		}
	}
}

// TestRunningCountsUseTheLeaseIndex: a limited claim counts the running
// tasks of a type or a queue on the lease index, which holds the running
// tasks only, never the table.
func TestRunningCountsUseTheLeaseIndex(t *testing.T) {
	t.Parallel()
	d := open(t)
	for name, q := range map[string]string{"type": sqlite.RunningOfTypeSQL, "queue": sqlite.RunningOfQueueSQL} {
		if all := queryPlan(t, d, q, "x"); !strings.Contains(all, "INDEX keel_tasks_lease") {
			t.Errorf("running tasks of a %s: want a read of keel_tasks_lease, got %s", name, all)
		}
	}
}

// TestClaimPlan: every claim reads the claim index in its order (no sort)
// and stops at the limit, though the limit is written ?5 + 0 so that
// binding it does not make SQLite compile the statement again.
func TestClaimPlan(t *testing.T) {
	t.Parallel()
	d := open(t)
	for name, q := range map[string]string{"all": sqlite.ClaimSQL, "types": sqlite.ClaimTypesSQL, "excluding": sqlite.ClaimExcludingSQL} {
		all := queryPlan(t, d, q, "n", 1, 1, "default", 16, `["a"]`)
		if !strings.Contains(all, "INDEX keel_tasks_claim ") || strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("claim (%s): want a read of keel_tasks_claim in order, got %s", name, all)
		} else {
			t.Logf("claim (%s): %s", name, all)
		}
	}
}

// queryPlan is SQLite's plan for q with args, its steps joined by "; ".
func queryPlan(t *testing.T, d *sqlite.Driver, q string, args ...any) string {
	t.Helper()
	rows, err := d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}
