package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
)

// TestCompleteTxConcurrentWithReconcile: 64 handlers finish their tasks
// in transactions of their own, the way CompleteTx does (FinishTx in a
// transaction begun on DB() at the server's default isolation, REPEATABLE
// READ), while four claimers feed them and Reconcile folds the counters
// again and again (the leader does every ReconcileInterval; the crash
// tests call it while workers run). keel cannot run a caller's
// transaction again, so none may fail: every task succeeds once, with its
// effect written once, and the counters need no correction.
//
// Reconcile used to delete the counter rows of every connection. A
// handler's counter upsert that waited for such a row kept its lock as a
// gap lock once purge removed the row; the handlers doing so each held
// the gap they then had to insert their own row into, and InnoDB killed
// all but one (error 1213, in bursts, as reported from the crash test
// KilledWorker); beginning the handlers' transactions at READ COMMITTED
// did not prevent it.
func TestCompleteTxConcurrentWithReconcile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const tasks, handlers, claimers, folders = 8000, 64, 4, 1
	d := open(t, mysql.Options{MaxConns: handlers + claimers + folders + 1})
	if _, err := d.DB().ExecContext(ctx, `CREATE TABLE effects (task_id BIGINT NOT NULL, attempt INT NOT NULL, KEY (task_id))`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	params := make([]driver.InsertParams, tasks)
	for i := range params {
		// Tiny tasks, runnable from a few seconds ago, in order.
		params[i] = driver.InsertParams{Queue: "default", Type: "t", Payload: []byte(`{}`), MaxAttempts: 3,
			RunAt: now.Add(time.Duration(i-tasks) * time.Millisecond), Timeout: time.Minute, PayloadDigest: "d", Now: now}
	}
	for len(params) > 0 {
		n := min(len(params), 2000)
		if _, err := d.Insert(ctx, params[:n]); err != nil {
			t.Fatal(err)
		}
		params = params[n:]
	}

	var (
		deadlocks atomic.Int64
		errMu     sync.Mutex
		errs      []error
		report    sync.Once
	)
	fail := func(err error) {
		var me *gomysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			deadlocks.Add(1)
			report.Do(func() { t.Logf("InnoDB's report:\n%s", latestDeadlock(d)) })
		}
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	claimed := make(chan driver.TaskRow, 256)
	var work sync.WaitGroup
	for range handlers {
		work.Go(func() {
			for r := range claimed {
				if err := completeTx(ctx, d, r); err != nil {
					fail(fmt.Errorf("task %d: %w", r.ID, err))
				}
			}
		})
	}
	var claim sync.WaitGroup
	for c := range claimers {
		claim.Go(func() {
			for {
				n := time.Now()
				rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 10 + 20*c, Owner: "w", Now: n,
					LeaseExpiresAt: n.Add(time.Hour)})
				if err != nil {
					fail(fmt.Errorf("claim: %w", err))
					return
				}
				if len(rows) == 0 {
					return
				}
				for _, r := range rows {
					claimed <- r
				}
			}
		})
	}
	stop := make(chan struct{})
	var reconciles atomic.Int64
	var fold sync.WaitGroup
	for range folders {
		fold.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := d.Reconcile(ctx, driver.ReconcileParams{}); err != nil {
					fail(fmt.Errorf("reconcile: %w", err))
				}
				reconciles.Add(1)
			}
		})
	}
	claim.Wait()
	close(claimed)
	work.Wait()
	close(stop)
	fold.Wait()
	t.Logf("%d reconciles; %d lock conflicts retried inside the driver", reconciles.Load(), d.LockRetries())
	if len(errs) > 0 {
		t.Fatalf("%d errors (%d deadlocks), the first: %v", len(errs), deadlocks.Load(), errs[0])
	}

	var distinct, total int64
	if err := d.DB().QueryRowContext(ctx, `SELECT COUNT(DISTINCT task_id), COUNT(*) FROM effects`).Scan(&distinct, &total); err != nil {
		t.Fatal(err)
	}
	if distinct != tasks || total != tasks {
		t.Fatalf("effects of %d tasks, %d in all; want each of %d once", distinct, total, tasks)
	}
	counts, err := d.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].Kind != string(driver.StateSucceeded) || counts[0].N != tasks {
		t.Fatalf("counts %+v, want %d succeeded", counts, tasks)
	}
	if fixed, err := d.Reconcile(ctx, driver.ReconcileParams{}); err != nil || len(fixed) != 0 {
		t.Fatalf("reconcile corrected %+v, %v", fixed, err)
	}
}

// completeTx is a handler's CompleteTx on r: its effect and r's success in
// one transaction of its own, begun without options.
func completeTx(ctx context.Context, d *mysql.Driver, r driver.TaskRow) error {
	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (task_id, attempt) VALUES (?, ?)`, r.ID, r.Attempt); err != nil {
		return err
	}
	applied, err := d.FinishTx(ctx, tx, "w", time.Now(), driver.Transition{ID: r.ID, Fence: r.Fence,
		State: driver.StateSucceeded, Task: &r})
	if err != nil {
		return err
	}
	if !applied {
		return errors.New("not applied")
	}
	return tx.Commit()
}

// latestDeadlock is the LATEST DETECTED DEADLOCK section of SHOW ENGINE
// INNODB STATUS.
func latestDeadlock(d *mysql.Driver) string {
	var typ, name, status string
	if err := d.DB().QueryRowContext(context.Background(), `SHOW ENGINE INNODB STATUS`).Scan(&typ, &name, &status); err != nil {
		return err.Error()
	}
	i := strings.Index(status, "LATEST DETECTED DEADLOCK")
	j := strings.Index(status, "\nTRANSACTIONS\n")
	if i < 0 || j < i {
		return "(none)"
	}
	return status[i:j]
}

// TestReconcileFoldsEndedConnections: Reconcile leaves the counter and
// history rows of live connections alone and folds those of connections
// that have ended into shard 0, changing no sum.
func TestReconcileFoldsEndedConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := open(t, mysql.Options{})
	now := time.Now().UTC()
	for range 3 {
		if _, err := d.Insert(ctx, []driver.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, PayloadDigest: "d", Now: now}}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "q", Limit: 1, Owner: "w", Now: now, LeaseExpiresAt: now.Add(time.Minute)})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claimed %d, %v", len(rows), err)
	}
	if ok, err := d.Finish(ctx, driver.FinishParams{Owner: "w", Now: now, Transitions: []driver.Transition{
		{ID: rows[0].ID, Fence: rows[0].Fence, State: driver.StateSucceeded, Task: &rows[0]}}}); err != nil || len(ok) != 1 {
		t.Fatalf("finished %v, %v", ok, err)
	}
	// The history of the current minute is folded too.
	later := driver.ReconcileParams{Now: time.Now().Add(2 * time.Minute)}
	counts, history := sums(t, d)
	shards := func() (counts, minutes []int64) {
		t.Helper()
		for table, out := range map[string]*[]int64{"keel_counts": &counts, "keel_minutes": &minutes} {
			rows, err := d.DB().QueryContext(ctx, `SELECT DISTINCT shard FROM `+table+` ORDER BY shard`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s int64
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				*out = append(*out, s)
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
		return counts, minutes
	}
	before, beforeMinutes := shards()
	if len(before) == 0 || before[0] == 0 || len(beforeMinutes) == 0 || beforeMinutes[0] == 0 {
		t.Fatalf("shards before reconciling: counters %v, history %v; want the connections' only", before, beforeMinutes)
	}
	if fixed, err := d.Reconcile(ctx, later); err != nil || len(fixed) != 0 {
		t.Fatalf("reconcile corrected %+v, %v", fixed, err)
	}
	if c, m := shards(); fmt.Sprint(c, m) != fmt.Sprint(before, beforeMinutes) {
		t.Fatalf("live connections' shards after reconciling: counters %v, history %v; want %v, %v untouched",
			c, m, before, beforeMinutes)
	}

	// End every connection of the pool and wait until the server lists
	// none of them.
	d.DB().SetMaxIdleConns(0)
	ended := append(before, beforeMinutes...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		q := `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (` + strings.Repeat("?, ", len(ended)-1) + `?)`
		args := make([]any, len(ended))
		for i, s := range ended {
			args[i] = s
		}
		if err := d.DB().QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the connections %v still listed", n, ended)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fixed, err := d.Reconcile(ctx, later); err != nil || len(fixed) != 0 {
		t.Fatalf("reconcile corrected %+v, %v", fixed, err)
	}
	if c, m := shards(); fmt.Sprint(c, m) != "[0] [0]" {
		t.Fatalf("ended connections' shards after reconciling: counters %v, history %v; want all in shard 0", c, m)
	}
	if c, h := sums(t, d); fmt.Sprint(c, h) != fmt.Sprint(counts, history) {
		t.Fatalf("folding changed the sums: counts %+v, history %+v; want %+v, %+v", c, h, counts, history)
	}
}

// sums reads the live counters and the history of the last hour.
func sums(t *testing.T, d *mysql.Driver) ([]driver.CountRow, []driver.MinuteRow) {
	t.Helper()
	counts, err := d.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	history, err := d.Minutes(t.Context(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return counts, history
}
