package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/testdb"
)

// TestLockingReadsUsePrimary: the statements that lock a list of tasks by
// id read them on the primary key, on a table where the planner would
// rather take a secondary index (most tasks finished, a few running,
// statistics fresh). Locking index entries before rows, against a single
// transition's rows-then-entries, deadlocked a caller's CompleteTx.
func TestLockingReadsUsePrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dsn := testdb.MySQLDatabase(t, "keel_plan")
	d, err := Open(ctx, dsn, Options{CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ps := make([]driver.InsertParams, 1000)
	for i := range ps {
		ps[i] = driver.InsertParams{Queue: "default", Type: "plan", Payload: []byte(`{}`), MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, Now: now, PayloadDigest: "x"}
	}
	for range 3 {
		if _, err := d.Insert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 3000, Owner: "n", Now: now, LeaseExpiresAt: now.Add(time.Hour)})
	if err != nil || len(rows) != 3000 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	fp := driver.FinishParams{Owner: "n", Now: now}
	for _, r := range rows[:2990] {
		fp.Transitions = append(fp.Transitions, driver.Transition{ID: r.ID, Fence: r.Fence, State: driver.StateSucceeded, Task: &r})
	}
	if _, err := d.Finish(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.ExecContext(ctx, "ANALYZE TABLE keel_tasks"); err != nil {
		t.Fatal(err)
	}
	running := rows[2990:2993]
	ids := []any{running[0].ID, running[1].ID, running[2].ID}
	pairs := []any{running[0].ID, running[0].Fence, running[1].ID, running[1].Fence, running[2].ID, running[2].Fence}
	micros := int64(time.Hour / time.Microsecond)
	ws := d.workflowSQL()
	hp := ps[0]
	hp.DependsOn = []int64{running[0].ID}
	held, err := d.InsertHeld(ctx, nil, []driver.InsertParams{hp})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    stmt
		args []any
	}{
		{"claim mark", sqlClaimMark.with("{ids}", "?", 3, 1), append([]any{"n", micros}, ids...)},
		{"succeed pick", sqlSucceedPick.with("{ids}", "?", 3, 1).with("{pairs}", "(?, ?)", 3, 2),
			append(append(append([]any{}, ids...), pairs...), "n")},
		{"succeed mark", sqlSucceedMark.with("{ids}", "?", 3, 1), append(append([]any{}, ids...), "n")},
		{"heartbeat pick", sqlHeartbeatPick.with("{ids}", "?", 3, 1), append(append([]any{}, ids...), "n")},
		{"heartbeat mark", sqlHeartbeatMark.with("{ids}", "?", 3, 1), append(append([]any{micros}, ids...), "n")},
		{"lock expired", sqlLockExpired.with("{ids}", "?", 3, 1), append(append([]any{}, ids...), now)},
		{"transition", sqlTransition, []any{"succeeded", nil, nil, 0, 0, nil, nil, "succeeded", "succeeded", ids[0], pairs[1], "n"}},
		{"sequence release", prepare(sequenceSQL.Release), []any{now, now, ids[0], driver.HeldUntil}},
		{"sequence key", prepare(sequenceSQL.SetKey), []any{"k", now, ids[0]}},
		{"held task read", prepare(ws.Counted), []any{held[0].Task.ID}},
		{"held task release", prepare(ws.Release), []any{now, held[0].Task.ID}},
		{"held task cancel", prepare(ws.Cancel), []any{now, "[]", held[0].Task.ID}},
	} {
		args := c.s.args(now, c.args...)
		key := planKey(t, d.db, c.s.text, args)
		if key != "PRIMARY" {
			t.Errorf("%s: reads keel_tasks through %q, want PRIMARY", c.name, key)
		}
		// What the planner takes without the hint: logged, to show the
		// test's table tempts it (it varies with the statistics).
		free := strings.Replace(c.s.text, " FORCE INDEX (PRIMARY)", "", 1)
		t.Logf("%s: %s with the hint, %s without", c.name, key, planKey(t, d.db, free, args))
	}
}

// planKey is the index EXPLAIN says query reads keel_tasks through.
func planKey(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var key string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if c == "key" {
				key = vals[i].String
			}
		}
	}
	return key
}
