package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

// TestHeartbeatGetsThroughBusyFile: two drivers on one file write as fast
// as they can (inserts, claims and finishes of hundreds of tasks, as busy
// processes do), and a third renews its leases every 100ms. Each driver
// has its own connections, so they contend for the file's write lock as
// processes do. Every renewal must get through well within a 2s lease.
// Before the writers took turns (the gate), renewals waited 1.1-3.3s
// while the busy drivers took the lock back after each commit.
func TestHeartbeatGetsThroughBusyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	quiet := openAt(t, path, sqlite.Options{})
	ctx := context.Background()
	ids := leased(t, quiet, "quiet", 10)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loads sync.Map
	for h := range 2 {
		busy := openAt(t, path, sqlite.Options{})
		owner := fmt.Sprintf("busy%d", h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for {
				select {
				case <-stop:
					loads.Store(owner, n)
					return
				default:
				}
				now := time.Now()
				insertN(t, busy, "default", 200, now)
				rows, err := busy.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 200, Owner: owner, Now: now, LeaseExpiresAt: now.Add(time.Minute)})
				if err != nil {
					t.Error(err)
					return
				}
				trs := make([]driver.Transition, len(rows))
				for i, r := range rows {
					trs[i] = driver.Transition{ID: r.ID, Fence: r.Fence, State: driver.StateSucceeded, Task: &rows[i]}
				}
				if _, err := busy.Finish(ctx, driver.FinishParams{Owner: owner, Now: time.Now(), Transitions: trs}); err != nil {
					t.Error(err)
					return
				}
				n += len(rows)
			}
		}()
	}
	var worst time.Duration
	beats := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); beats++ {
		time.Sleep(100 * time.Millisecond)
		at := time.Now()
		held, err := quiet.Heartbeat(ctx, driver.HeartbeatParams{Owner: "quiet", IDs: ids, Now: at, LeaseExpiresAt: at.Add(2 * time.Second)})
		took := time.Since(at)
		if err != nil || len(held) != len(ids) {
			t.Fatalf("heartbeat after %v: held %d of %d, %v", took, len(held), len(ids), err)
		}
		worst = max(worst, took)
	}
	close(stop)
	wg.Wait()
	var busy []string
	loads.Range(func(k, v any) bool { busy = append(busy, fmt.Sprintf("%v: %v tasks", k, v)); return true })
	// A 2s lease renewed every 400ms leaves a renewal 1.6s; the heartbeat
	// warns when one takes half of that. Under the race detector every
	// write is several times slower: the whole margin then.
	limit := 800 * time.Millisecond
	if raceEnabled {
		limit = 1600 * time.Millisecond
	}
	t.Logf("%d renewals, the slowest took %v (limit %v); meanwhile %v", beats, worst, limit, busy)
	if worst > limit {
		t.Errorf("a renewal took %v behind the other writers", worst)
	}
}

// leased inserts n tasks in queue "mine" and claims them for owner with
// a 2s lease, returning their ids.
func leased(t *testing.T, d *sqlite.Driver, owner string, n int) []int64 {
	t.Helper()
	now := time.Now()
	insertN(t, d, "mine", n, now)
	claimed, err := d.Claim(context.Background(), driver.ClaimParams{Queue: "mine", Limit: n, Owner: owner, Now: now, LeaseExpiresAt: now.Add(2 * time.Second)})
	if err != nil || len(claimed) != n {
		t.Fatalf("claim: %d of %d tasks, %v", len(claimed), n, err)
	}
	ids := make([]int64, n)
	for i, r := range claimed {
		ids[i] = r.ID
	}
	return ids
}

func insertN(t *testing.T, d *sqlite.Driver, queue string, n int, now time.Time) []driver.InsertResult {
	t.Helper()
	ps := make([]driver.InsertParams, n)
	for i := range ps {
		ps[i] = driver.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, Now: now, PayloadDigest: "x"}
	}
	res, err := d.Insert(context.Background(), ps)
	if err != nil {
		t.Error(err)
	}
	return res
}

// TestOpenTogetherOnNewFile: drivers opened at once on a new file (as
// processes starting together do) all open; those that find another
// migrating wait for it.
func TestOpenTogetherOnNewFile(t *testing.T) {
	t.Parallel()
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "keel.db")
		start := make(chan struct{})
		errs := make(chan error, 5)
		var opened sync.WaitGroup
		for range 5 {
			opened.Add(1)
			go func() {
				defer opened.Done()
				<-start
				d, err := sqlite.Open(context.Background(), path, sqlite.Options{})
				if err == nil {
					err = d.Close()
				}
				errs <- err
			}()
		}
		close(start)
		opened.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// TestOpenWaitsForFileBeingCreated: another process holds the write lock
// of a new file that is not in WAL mode yet (as keel does while it turns a
// new file to WAL and migrates it). Open must wait for the lock, within
// its busy timeout, and then open, not fail at once with SQLITE_BUSY:
// SQLite does not call the busy handler when a connection that already
// reads asks to write, which turning a file to WAL does.
func TestOpenWaitsForFileBeingCreated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	other, err := sqlite.OpenJournal(path, "DELETE")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	ctx := context.Background()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE other (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		released <- time.Now()
		tx.Commit() //nolint:errcheck // the test fails on the Open below
	}()
	d, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatalf("Open while another process held the new file's write lock: %v", err)
	}
	defer d.Close()
	if at := <-released; time.Now().Before(at) {
		t.Fatal("Open returned before the lock was released")
	}
}

// TestLeaseCountsFromTheWrite: a claim and a renewal that wait 1.5s for
// the write lock (here a caller's transaction holds it) write leases that
// count from when they ran, not from when they were asked for: a 1s lease
// stamped before the wait would have run out before it was written, and
// the rescuer would take tasks from a live worker. With
// Options.CallerClock the stamps are written as given.
func TestLeaseCountsFromTheWrite(t *testing.T) {
	t.Parallel()
	const hold, lease = 1500 * time.Millisecond, time.Second
	for _, exact := range []bool{false, true} {
		d := openAt(t, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{CallerClock: exact})
		ctx := context.Background()
		insertN(t, d, "default", 4, time.Now())
		// held runs op while a caller's transaction holds the write lock
		// for hold, and returns when op does.
		held := func(op func()) {
			tx, err := d.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE keel_tasks SET priority = priority WHERE id = 0`); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); op() }()
			time.Sleep(hold)
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			<-done
		}
		var claimed []driver.TaskRow
		asked := time.Now()
		held(func() {
			var err error
			claimed, err = d.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 2, Owner: "w", Now: asked, LeaseExpiresAt: asked.Add(lease)})
			if err != nil || len(claimed) != 2 {
				t.Errorf("claim: %d tasks, %v", len(claimed), err)
			}
		})
		if t.Failed() {
			return
		}
		expired, _, err := d.ListExpired(ctx, driver.ExpiredParams{Now: time.Now(), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case exact && len(expired) != 2:
			t.Errorf("CallerClock: %d claimed tasks expired after waiting %v for a %v lease, want the 2 stamped as asked", len(expired), hold, lease)
		case !exact && len(expired) != 0:
			t.Errorf("%d claimed tasks expired as soon as the claim that waited %v returned: the %v lease counted from when it was asked for", len(expired), hold, lease)
		}
		for _, r := range claimed {
			if exact != r.LeaseExpiresAt.Equal(asked.Add(lease)) || r.LeaseExpiresAt.Before(asked.Add(lease)) {
				t.Errorf("CallerClock %v: task %d's lease runs to %v, asked for %v from %v", exact, r.ID, r.LeaseExpiresAt, lease, asked)
			}
		}

		ids := []int64{claimed[0].ID, claimed[1].ID}
		asked = time.Now()
		held(func() {
			got, err := d.Heartbeat(ctx, driver.HeartbeatParams{Owner: "w", IDs: ids, Now: asked, LeaseExpiresAt: asked.Add(lease)})
			if err != nil {
				t.Errorf("heartbeat: %v", err)
			}
			if !exact && len(got) != 2 {
				t.Errorf("heartbeat renewed %v of %v", got, ids)
			}
		})
		expired, _, err = d.ListExpired(ctx, driver.ExpiredParams{Now: time.Now(), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !exact && len(expired) != 0 {
			t.Errorf("%d renewed tasks expired as soon as the renewal that waited %v returned", len(expired), hold)
		}
	}
}

// TestHeartbeatGetsThroughCallerTransactions: twenty handlers of one
// process write in transactions on DB() without pause, each holding its
// transaction 20ms (their work), while the process renews its leases
// every 100ms. A renewal waits for one caller's transaction at most
// (turns.go); when the writer waited in DB()'s pool among the handlers,
// taken in no order, renewals waited seconds and live leases ran out.
func TestHeartbeatGetsThroughCallerTransactions(t *testing.T) {
	t.Parallel()
	d := openAt(t, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	ctx := context.Background()
	if _, err := d.DB().ExecContext(ctx, `CREATE TABLE ledger (id INTEGER PRIMARY KEY, n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	ids := leased(t, d, "w", 10)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written sync.Map
	for h := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			defer func() { written.Store(h, n) }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tx, err := d.DB().BeginTx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (n) VALUES (?)`, h); err != nil {
					t.Error(err)
					tx.Rollback() //nolint:errcheck // the insert's error is what matters
					return
				}
				time.Sleep(20 * time.Millisecond)
				if err := tx.Commit(); err != nil {
					t.Error(err)
					return
				}
				n++
			}
		}()
	}
	var worst time.Duration
	beats := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); beats++ {
		time.Sleep(100 * time.Millisecond)
		at := time.Now()
		held, err := d.Heartbeat(ctx, driver.HeartbeatParams{Owner: "w", IDs: ids, Now: at, LeaseExpiresAt: at.Add(2 * time.Second)})
		worst = max(worst, time.Since(at))
		if err != nil || len(held) != len(ids) {
			t.Fatalf("renewal: %d of %d held, %v", len(held), len(ids), err)
		}
	}
	close(stop)
	wg.Wait()
	total, idle := 0, 0
	written.Range(func(_, v any) bool {
		total += v.(int)
		if v.(int) == 0 {
			idle++
		}
		return true
	})
	t.Logf("%d renewals, the slowest %v; the handlers committed %d transactions", beats, worst, total)
	if worst > 500*time.Millisecond {
		t.Errorf("a renewal waited %v behind the handlers' transactions (20ms each), want under 500ms", worst)
	}
	if idle > 0 {
		t.Errorf("%d of 20 handlers never got a transaction through while the writer renewed leases", idle)
	}
}
