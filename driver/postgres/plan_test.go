package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
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
	// The table's statistics are the test's own: none until its VACUUM,
	// then its ANALYZE. Where autovacuum runs, an analyze of its own could
	// come between the fill and the claims: the VACUUM phase then had
	// statistics from when every task was pending, on which the archive
	// statements read keel_tasks_failed and sort (an ANALYZE there fails
	// them every time).
	if _, err := pool.Exec(ctx, "ALTER TABLE "+d.Schema()+".keel_tasks SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	fill(t, d, 20000)
	// Some of them running, as in a live system: a thousand, the most one
	// claim or one finish takes, so that a batch is large against the
	// table.
	rows := claimAll(t, d, 1000, 30*time.Second)

	idList, keyList := make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		idList[i], keyList[i] = fmt.Sprint(r.ID), fmt.Sprintf("%d:%d", r.ID, r.Fence)
	}
	ids := "'{" + strings.Join(idList, ",") + "}'"
	keys := "'{" + strings.Join(keyList, ",") + "}'"

	statements := []struct {
		name, sql, types, args, index, cond string
		// The rescuer may sort what it reads (only expired leases), and
		// the statements by id their own rows, to lock them in id order.
		sortOK bool
	}{
		{"claim", d.ClaimSQL(), "timestamptz, text, integer, text, bigint", "NULL, 'default', 1000, 'w', 30000000",
			"keel_tasks_claim", "run_at <=", false},
		// The claim as workers run it: only the types they handle, less
		// the paused ones. (The claim that only skips paused types,
		// claimExcluding, which workers no longer send, is read whole and
		// sorted by the generic plan once the table has statistics.)
		{"claim of handled types", d.ClaimTypesSQL(), "timestamptz, text, integer, text, bigint, text[]",
			"NULL, 'default', 1000, 'w', 30000000, '{t,u,v}'", "keel_tasks_claim", "run_at <=", false},
		{"expired", d.ExpiredSQL(), "timestamptz, integer", "NULL, 100",
			"keel_tasks_lease", "lease_expires_at <", true},
		// The ETA counts the tasks ahead within one due minute; every task
		// here was enqueued at one instant, so a range that held them all
		// would rightly be read whole: the range starts after them, as in
		// a backlog spread over time.
		{"count ahead", d.CountAheadSQL(), "timestamptz, text, integer, timestamptz, bigint, timestamptz, integer",
			"NULL, 'default', 0, now(), 1, now(), 100000",
			"keel_tasks_claim", "run_at <=", false},
		// Statements that go by id read the primary key, not every running
		// task through the lease index.
		{"finish a batch", d.SucceedManySQL(), "timestamptz, bigint[], text[], text", "NULL, " + ids + ", " + keys + ", 'w'",
			"keel_tasks_pkey", "id =", true},
		{"transition", d.TransitionSQL(), "timestamptz, text, bigint, text, integer, text, bigint, bigint, text, integer",
			fmt.Sprintf("NULL, 'pending', 1000, NULL, 0, NULL, %d, %d, 'w', 0", rows[0].ID, rows[0].Fence),
			"keel_tasks_pkey", "id =", false},
		{"heartbeat", d.HeartbeatSQL(), "timestamptz, bigint, bigint[], text", "NULL, 30000000, " + ids + ", 'w'",
			"keel_tasks_pkey", "id =", true},
		// Archival reads finished tasks by finish time on their index,
		// never the table. (This table has no finished rows, so the
		// planner may sort the none it finds; with many rows past the
		// cutoff the LIMIT makes it read the index in order.)
		{"archive succeeded", d.ArchiveSQL("succeeded"), "timestamptz, bigint, bigint", "NULL, -3600000000, 1000",
			"keel_tasks_finished", "finished_at <", true},
		{"archive dead", d.ArchiveSQL("dead"), "timestamptz, bigint, bigint", "NULL, -3600000000, 1000",
			"keel_tasks_finished", "finished_at <", true},
		{"archive cancelled", d.ArchiveSQL("cancelled"), "timestamptz, bigint, bigint", "NULL, -3600000000, 1000",
			"keel_tasks_cancelled", "finished_at <", true},
		// A limited claim counts the running tasks of a type or a queue
		// on the lease index, which holds the running tasks only: as a
		// range from -infinity, or without statistics on lease_expires_at
		// the planner read the whole table.
		{"running of a type", d.RunningOfTypeSQL(), "text", "'t'", "keel_tasks_lease", "lease_expires_at >", false},
		{"running of a queue", d.RunningOfQueueSQL(), "text", "'default'", "keel_tasks_lease", "lease_expires_at >", false},
		// A task by its key, on the key's index.
		{"by key", d.ByKeySQL(), "text", "'k:x'", "keel_tasks_idem", "idem_key =", false},
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

// TestPlansOfTheDashboardReads: with a table of finished tasks (19,000
// dead, 1,000 succeeded), the newest finished tasks are read backwards
// along keel_tasks_finished without a sort, and the bulk operations by id
// read the primary key, not every dead letter.
func TestPlansOfTheDashboardReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	fill(t, d, 20000)
	if _, err := pool.Exec(ctx, `UPDATE `+d.Schema()+`.keel_tasks SET state = CASE WHEN id % 20 = 0 THEN 'succeeded' ELSE 'dead' END,
		attempt = 1, attempted_at = now() - interval '1 hour', finished_at = now() - id * interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	var idList []string
	for i := range 1000 {
		idList = append(idList, fmt.Sprint(i*7+1))
	}
	ids := "'{" + strings.Join(idList, ",") + "}'"
	statements := []struct{ name, sql, types, args, index, cond string }{
		{"recent finished", d.RecentFinishedSQL(), "timestamptz, integer", "'1970-01-01', 1000", "keel_tasks_finished", "finished_at >="},
		{"retry by ids", d.RetryMatchingIDsSQL(), "timestamptz, text, text, text, timestamptz, timestamptz, integer, bigint[]",
			"NULL, 'dead', NULL, NULL, NULL, NULL, 1000, " + ids, "keel_tasks_pkey", "id ="},
		{"purge by ids", d.PurgeMatchingIDsSQL(), "timestamptz, text, text, text, timestamptz, timestamptz, integer, bigint[]",
			"NULL, 'dead', NULL, NULL, NULL, NULL, 1000, " + ids, "keel_tasks_pkey", "id ="},
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+d.Schema()+".keel_tasks"); err != nil {
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
			// The bulk operations sort the ids they found, to lock in order.
			if (sorted && st.index == "keel_tasks_finished") || !onIndex {
				b, _ := json.MarshalIndent(plan, "", "  ")
				t.Errorf("%s (%s): want %s read with %q (sorted: %v), got\n%s", st.name, mode, st.index, st.cond, sorted, b)
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

// fill enqueues n tasks of type "t" through a client on d.
func fill(t *testing.T, d driver.Driver, n int) {
	t.Helper()
	c, err := keel.NewClient(keel.Config{Driver: d, Types: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]keel.TaskSpec, n)
	for i := range jobs {
		jobs[i] = keel.TaskSpec{Type: "t", Payload: map[string]int{"n": i}}
	}
	if _, err := c.EnqueueMany(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
}

// TestPlansFollowTheTable: statements first run while the task table was
// small must not keep reading it whole once it has grown. A connection
// caches a generic plan after five executions; for a batch finish prepared
// on a table of a few pages that plan was a sequential scan, kept as the
// table grew. The driver runs here on a pool of one connection, warms every
// statement that goes by id on 60 tasks, grows the table to 20,000, and
// checks in the table's statistics that the work that follows reads no
// table sequentially.
func TestPlansFollowTheTable(t *testing.T) {
	t.Parallel()
	testdb.Require(t, testdb.Postgres)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	schema := testdb.PostgresSchema(t, "keel_test_plan")
	d, err := postgres.New(ctx, one, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close() //nolint:errcheck // the pool is closed next
	// work claims n tasks and runs every statement that goes by id on them.
	work := func(n int) {
		t.Helper()
		now := time.Now()
		rows, err := d.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: n, Owner: "w", Now: now,
			LeaseExpiresAt: now.Add(time.Minute)})
		if err != nil || len(rows) != n {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		ids := make([]int64, n)
		finish := driver.FinishParams{Owner: "w", Now: now}
		for i, r := range rows {
			ids[i] = r.ID
			state := driver.StateSucceeded
			if i == 0 {
				state = driver.StateDead // one transition of its own
			}
			finish.Transitions = append(finish.Transitions, driver.Transition{ID: r.ID, Fence: r.Fence, State: state})
		}
		if held, err := d.Heartbeat(ctx, driver.HeartbeatParams{Owner: "w", IDs: ids, Now: now,
			LeaseExpiresAt: now.Add(time.Minute)}); err != nil || len(held) != n {
			t.Fatalf("heartbeat: %d held, %v", len(held), err)
		}
		if done, err := d.Finish(ctx, finish); err != nil || len(done) != n {
			t.Fatalf("finish: %d done, %v", len(done), err)
		}
		if _, err := d.Get(ctx, ids[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Retry(ctx, ids[0], now); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Cancel(ctx, ids[0], now); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, d, 60)
	for range 8 {
		work(5)
	}
	fill(t, d, 20000)
	scans := func() (seq, idx int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables
			WHERE schemaname = $1 AND relname = 'keel_tasks'`, schema).Scan(&seq, &idx); err != nil {
			t.Fatal(err)
		}
		return seq, idx
	}
	// A backend's statistics reach other sessions when it flushes them; the
	// pool's one connection is the session that ran the statements.
	flush := func() {
		t.Helper()
		if _, err := one.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	var seq0, idx0 int64
	for deadline := time.Now().Add(10 * time.Second); idx0 == 0; time.Sleep(100 * time.Millisecond) {
		seq0, idx0 = scans()
		if time.Now().After(deadline) {
			t.Fatal("the warm-up's statistics did not arrive")
		}
	}
	work(100)
	flush()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		seq, idx := scans()
		if idx > idx0 {
			if seq != seq0 {
				t.Fatalf("%d sequential scans of the task table after it grew to 20,000 tasks, want 0", seq-seq0)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no index scans reached the statistics")
		}
	}
}

// TestFinishAndHeartbeatDoNotDeadlock: a process's heartbeat and its
// finishing batches lock the same running rows at the same time, in
// different orders. When both waited for locks, PostgreSQL detected
// deadlocks between them; the heartbeat now skips locked rows.
func TestFinishAndHeartbeatDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	const n = 3000
	fill(t, d, n)
	running := claimAll(t, d, n, time.Hour)
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	rng.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })

	done := make(chan struct{})
	beatErr := make(chan error, 1)
	go func() { // the heartbeat: every running id, in shuffled order, again and again
		defer close(beatErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			ids := make([]int64, 0, n)
			for _, r := range running {
				ids = append(ids, r.ID)
			}
			rng := mathrand.New(mathrand.NewPCG(3, uint64(len(ids))))
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			now := time.Now()
			if _, err := d.Heartbeat(ctx, driver.HeartbeatParams{Owner: "w", IDs: ids, Now: now,
				LeaseExpiresAt: now.Add(time.Hour)}); err != nil {
				beatErr <- err
				return
			}
		}
	}()
	// Batches of 100 in shuffled order, a fifth of them retries (each its
	// own statement after the batch's successes), finished by four
	// goroutines at once as a busy completer would.
	var wg sync.WaitGroup
	errs := make(chan error, n/100)
	for b := 0; b < n; b += 100 {
		batch := running[b : b+100]
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := driver.FinishParams{Owner: "w", Now: time.Now()}
			for i, r := range batch {
				tr := driver.Transition{ID: r.ID, Fence: r.Fence, State: driver.StateSucceeded}
				if i%5 == 0 {
					tr.State, tr.RunAt = driver.StatePending, p.Now.Add(time.Hour)
				}
				p.Transitions = append(p.Transitions, tr)
			}
			got, err := d.Finish(ctx, p)
			if err == nil && len(got) != len(batch) {
				err = fmt.Errorf("finished %d of %d", len(got), len(batch))
			}
			errs <- err
		}()
		if b%400 == 300 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(done)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("finish: %v", err)
		}
	}
	if err := <-beatErr; err != nil {
		t.Errorf("heartbeat: %v", err)
	}
}

// TestHeartbeatSkipsLockedRows: a heartbeat does not wait for a row another
// transaction holds. It renews the others, reports the held row as still
// held (it was running under the owner when the beat began) and leaves its
// lease alone; the next beat, once the lock is gone, renews it.
func TestHeartbeatSkipsLockedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	fill(t, d, 2)
	rows := claimAll(t, d, 2, time.Minute)
	locked, free := rows[0].ID, rows[1].ID

	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the test ends the transaction itself
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+d.Schema()+".keel_tasks WHERE id = $1 FOR UPDATE", locked); err != nil {
		t.Fatal(err)
	}
	leaseOf := func(id int64) time.Time {
		t.Helper()
		var at time.Time
		if err := d.Pool().QueryRow(ctx, "SELECT lease_expires_at FROM "+d.Schema()+".keel_tasks WHERE id = $1", id).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	beat := func(until time.Time) []int64 {
		t.Helper()
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		held, err := d.Heartbeat(bctx, driver.HeartbeatParams{Owner: "w", IDs: []int64{locked, free}, Now: time.Now(),
			LeaseExpiresAt: until})
		if err != nil {
			t.Fatalf("heartbeat with a row locked elsewhere: %v", err)
		}
		return held
	}

	until := time.Now().Add(time.Hour)
	if held := beat(until); !sameSet(held, []int64{locked, free}) {
		t.Fatalf("heartbeat held %v, want both %d and %d", held, locked, free)
	}
	if got := leaseOf(free); got.Sub(until).Abs() > time.Second {
		t.Errorf("free row's lease %v, want %v", got, until)
	}
	if got := leaseOf(locked); got.Sub(until).Abs() < 10*time.Minute {
		t.Errorf("locked row's lease renewed to %v while another transaction held it", got)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	until = time.Now().Add(2 * time.Hour)
	if held := beat(until); !sameSet(held, []int64{locked, free}) {
		t.Fatalf("second heartbeat held %v", held)
	}
	if got := leaseOf(locked); got.Sub(until).Abs() > time.Second {
		t.Errorf("lease after the lock ended %v, want %v", got, until)
	}
}

func sameSet(a, b []int64) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// claimAll claims n of the filled tasks for owner "w", leased for lease.
func claimAll(t *testing.T, d *postgres.Driver, n int, lease time.Duration) []driver.TaskRow {
	t.Helper()
	var rows []driver.TaskRow
	for len(rows) < n {
		now := time.Now()
		got, err := d.Claim(context.Background(), driver.ClaimParams{Queue: keel.DefaultQueue, Limit: min(n-len(rows), 1000),
			Owner: "w", Now: now, LeaseExpiresAt: now.Add(lease)})
		if err != nil || len(got) == 0 {
			t.Fatalf("claim: %d rows, %v", len(got), err)
		}
		rows = append(rows, got...)
	}
	return rows
}

// TestListPlansUseAnIndex: List by dead or cancelled state reads the partial index
// of failed tasks, by running state the lease index (sorting only the
// running tasks), and never walks every id backwards: the dashboard's task
// lists on a table of millions. List plans each call for its values, as
// EXPLAIN does here.
func TestListPlansUseAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	fill(t, d, 20000)
	claimAll(t, d, 100, 30*time.Second)
	if _, err := pool.Exec(ctx, "ANALYZE "+d.Schema()+".keel_tasks"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		f      driver.Filter
		index  string
		sortOK bool
	}{
		{"dead", driver.Filter{State: driver.StateDead}, "keel_tasks_failed", false},
		{"cancelled", driver.Filter{State: driver.StateCancelled}, "keel_tasks_failed", false},
		{"dead of a rare type", driver.Filter{State: driver.StateDead, Type: "rare"}, "", false},
		{"running", driver.Filter{State: driver.StateRunning}, "keel_tasks_lease", true},
	} {
		c.f.Limit = 51
		q, args := d.ListSQL(c.f)
		var raw []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+q, args...).Scan(&raw); err != nil {
			t.Fatalf("%s: explain: %v", c.name, err)
		}
		var out []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
			t.Fatalf("%s: explain output %s: %v", c.name, raw, err)
		}
		var sorted, onIndex bool
		out[0].Plan.walk(func(n planNode) {
			switch {
			case n.Type == "Sort" || n.Type == "Incremental Sort":
				sorted = true
			case n.Index == "keel_tasks_pkey" || n.Type == "Seq Scan":
				// Walking every id, or the table.
			case n.Index != "" && (c.index == "" || n.Index == c.index):
				onIndex = true
			}
		})
		if (sorted && !c.sortOK) || !onIndex {
			b, _ := json.MarshalIndent(out[0].Plan, "", "  ")
			t.Errorf("List by %s: want an index read (%q; sorted: %v), got\n%s", c.name, c.index, sorted, b)
		}
	}
}
