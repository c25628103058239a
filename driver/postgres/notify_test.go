package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/testdb"
)

// Wake-ups are measured against a worker whose poll is far away, so a task
// it starts quickly can only have been woken by a notification.
const (
	farPoll = 30 * time.Second
	// pickupLimit is how soon a notified worker must start a task: well
	// below farPoll, with room for a loaded machine.
	pickupLimit = 5 * time.Second
)

// listenerPID waits until the listener of schema is connected and listening
// and returns its backend's pid, skipping the pid not (0: any).
func listenerPID(t *testing.T, schema string, not int32) int32 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pids []int32
		rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN %' AND pid <> $2`, "keel_listener:"+schema, not)
		if err == nil {
			for rows.Next() {
				var pid int32
				if err = rows.Scan(&pid); err != nil {
					break
				}
				pids = append(pids, pid)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if err != nil {
			t.Fatalf("find listener: %v", err)
		}
		if len(pids) == 1 {
			return pids[0]
		}
		if len(pids) > 1 {
			t.Fatalf("%d listeners on schema %s, want 1", len(pids), schema)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listener on schema %s after 20s", schema)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminate(t *testing.T, pid int32) {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate listener backend %d: %v %v", pid, ok, err)
	}
}

func insertParams(queue string, runAt time.Time) driver.InsertParams {
	now := time.Now()
	if runAt.IsZero() {
		runAt = now
	}
	return driver.InsertParams{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 3,
		RunAt: runAt, Timeout: time.Minute, PayloadDigest: "d-" + queue, Now: now}
}

// insertInTx inserts ps through d.InsertTx in a transaction of the test's
// pool, then commits it or, if commit is false, rolls it back. The driver
// does not see the commit: the notification carries no token and reaches
// d's own listeners over their connection, as another process's would.
func insertInTx(t *testing.T, d *postgres.Driver, commit bool, ps ...driver.InsertParams) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.InsertTx(ctx, tx, ps); err != nil {
		tx.Rollback(ctx) //nolint:errcheck // failing anyway
		t.Fatalf("insert in tx: %v", err)
	}
	if commit {
		err = tx.Commit(ctx)
	} else {
		err = tx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// wakeRecorder is a ListenParams that records wake-ups and errors.
type wakeRecorder struct {
	wakes chan string
	mu    sync.Mutex
	errs  []error
}

func newWakeRecorder() *wakeRecorder { return &wakeRecorder{wakes: make(chan string, 100)} }

func (r *wakeRecorder) params() driver.ListenParams {
	return driver.ListenParams{
		Wake: func(q string) { r.wakes <- q },
		Error: func(err error) {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		},
	}
}

// expect reads the next wake-ups and compares them with want, in order.
func (r *wakeRecorder) expect(t *testing.T, want ...string) {
	t.Helper()
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case q := <-r.wakes:
			got = append(got, q)
		case <-timeout:
			t.Fatalf("wake-ups %q, want %q", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("wake-ups %q, want %q", got, want)
	}
}

// TestListenNotifiesReadyTasks drives the driver's Listen directly: one
// wake-up per distinct queue of a committed batch, none for scheduled
// tasks, duplicates, rolled-back transactions or another schema; retry and
// rescue notify; a killed listening connection comes back and says so with
// a wake-up for every queue. A marker closes each check of notifications
// sent by others: it is committed in a transaction of the test's, so it
// too reaches the listener as a notification, and a connection receives
// notifications in commit order: anything sent before the marker has
// arrived by then. (A write through d itself wakes d's listeners directly
// before it returns and is no marker: under load it overtook the
// notification of a transaction committed before it.)
func TestListenNotifiesReadyTasks(t *testing.T) {
	t.Parallel()
	d := open(t, postgres.Options{})
	other := open(t, postgres.Options{})
	ctx := context.Background()
	rec := newWakeRecorder()
	lctx, stop := context.WithCancel(ctx)
	listenDone := make(chan error, 1)
	go func() { listenDone <- d.Listen(lctx, rec.params()) }()
	defer func() {
		stop()
		if err := <-listenDone; err != nil {
			t.Errorf("Listen returned %v, want nil", err)
		}
	}()
	rec.expect(t, "") // connected: every queue
	pid := listenerPID(t, d.Schema(), 0)

	insert := func(d *postgres.Driver, ps ...driver.InsertParams) []driver.InsertResult {
		t.Helper()
		res, err := d.Insert(ctx, ps)
		if err != nil {
			t.Fatalf("insert: %v", err)
		}
		return res
	}
	batch := insert(d, insertParams("a", time.Time{}), insertParams("a", time.Time{}), insertParams("b", time.Time{}))
	rec.expect(t, "a", "b")

	insert(d, insertParams("later", time.Now().Add(time.Hour)))
	keyed := insertParams("dup", time.Time{})
	keyed.IdemKey = "k"
	insert(d, keyed)
	insert(d, keyed) // a duplicate inserts nothing
	insert(other, insertParams("other-schema", time.Time{}))
	for _, commit := range []bool{false, true} {
		insertInTx(t, d, commit, insertParams(fmt.Sprintf("tx-%v", commit), time.Time{}))
	}
	insertInTx(t, d, true, insertParams("marker-1", time.Time{}))
	rec.expect(t, "dup", "tx-true", "marker-1")

	// A batch big enough to be written with COPY notifies the same way.
	var big []driver.InsertParams
	for i := range 10 {
		big = append(big, insertParams([]string{"c", "d"}[i%2], time.Time{}))
	}
	insert(d, big...)
	rec.expect(t, "c", "d")

	// Retry of a cancelled task, and rescue of an expired lease.
	id := batch[0].Task.ID
	if _, err := d.Cancel(ctx, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Retry(ctx, id, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec.expect(t, "a")
	insert(d, insertParams("rescue", time.Time{}))
	rec.expect(t, "rescue")
	now := time.Now()
	claimed, err := d.Claim(ctx, driver.ClaimParams{Queue: "rescue", Limit: 1, Owner: "gone", Now: now,
		LeaseExpiresAt: now.Add(time.Microsecond)})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %d tasks", err, len(claimed))
	}
	for {
		expired, at, err := d.ListExpired(ctx, driver.ExpiredParams{Now: time.Now(), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var tasks []driver.RescueTask
		for i := range expired {
			tasks = append(tasks, driver.RescueTask{Owner: expired[i].LeaseOwner, Transition: engine.ExpiredTransition(&expired[i], at, 0)})
		}
		rescued, err := d.Rescue(ctx, driver.RescueParams{Now: at, Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		if len(rescued) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rec.expect(t, "rescue")

	// Kill the listening connection: it reconnects and wakes every queue.
	terminate(t, pid)
	rec.expect(t, "")
	listenerPID(t, d.Schema(), pid)
	insert(d, insertParams("again", time.Time{}))
	rec.expect(t, "again")
	rec.mu.Lock()
	if len(rec.errs) != 1 {
		t.Errorf("Error called %d times (%v), want once", len(rec.errs), rec.errs)
	}
	rec.mu.Unlock()
}

// logTo routes a client's logs to t.Log.
func logTo(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// crossProcess is two clients on one schema, as two processes would be: an
// enqueue-only client, and a worker that polls every 30s and reports when
// each task starts.
type crossProcess struct {
	enqueuer, worker *keel.Client
	schema           string
	started          chan int64
}

func newCrossProcess(t *testing.T) *crossProcess {
	t.Helper()
	d := open(t, postgres.Options{})
	// A second driver on the same schema, as another process would have.
	d2, err := postgres.New(context.Background(), pool, postgres.Options{Schema: d.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	cp := &crossProcess{schema: d.Schema(), started: make(chan int64, 100)}
	h := keel.NewHandlers()
	keel.Handle(h, "ping", func(ctx context.Context, task *keel.Task[struct{}]) error {
		cp.started <- task.ID
		return nil
	})
	if cp.enqueuer, err = keel.NewClient(keel.Config{Driver: d2, Types: []string{"ping"}, Logger: logTo(t)}); err != nil {
		t.Fatal(err)
	}
	cp.worker, err = keel.NewClient(keel.Config{Driver: d, Handlers: h, PollInterval: farPoll, Logger: logTo(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.worker.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cp.worker.Stop(ctx) //nolint:errcheck // always nil
	})
	return cp
}

// pickup enqueues a task on the enqueue-only client and returns how long
// the worker took to start it.
func (cp *crossProcess) pickup(t *testing.T) time.Duration {
	t.Helper()
	begin := time.Now()
	info, err := cp.enqueuer.Enqueue(context.Background(), "ping", struct{}{})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	select {
	case id := <-cp.started:
		if id != info.ID {
			t.Fatalf("started task %d, want %d", id, info.ID)
		}
		return time.Since(begin)
	case <-time.After(pickupLimit):
		t.Fatalf("task %d not started within %v by a worker polling every %v: no wake-up", info.ID, pickupLimit, farPoll)
		return 0
	}
}

// TestNotifyWakesWorkerInOtherProcess: a task enqueued through one client
// starts in another client's worker within milliseconds although that
// worker polls only every 30s. The first pickup may also be served by the
// wake-up that follows the listener's connect; the later ones only by
// notifications.
func TestNotifyWakesWorkerInOtherProcess(t *testing.T) {
	t.Parallel()
	cp := newCrossProcess(t)
	listenerPID(t, cp.schema, 0)
	const rounds = 10
	lat := make([]time.Duration, rounds)
	for i := range lat {
		lat[i] = cp.pickup(t)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("cross-process pickup latency over %d tasks (enqueue call to handler start): min %v, median %v, max %v",
		rounds, lat[0], lat[rounds/2], lat[rounds-1])
}

// TestNotifyResumesAfterListenerKilled: after the listener's backend is
// terminated, the listener reconnects and tasks enqueued elsewhere are
// again picked up at once.
func TestNotifyResumesAfterListenerKilled(t *testing.T) {
	t.Parallel()
	cp := newCrossProcess(t)
	pid := listenerPID(t, cp.schema, 0)
	cp.pickup(t)
	for range 2 {
		terminate(t, pid)
		pid = listenerPID(t, cp.schema, pid)
		t.Logf("pickup after reconnect: %v", cp.pickup(t))
	}
}

// TestNotifySchemasIsolated: a task enqueued in another schema does not
// wake this schema's listener.
func TestNotifySchemasIsolated(t *testing.T) {
	t.Parallel()
	a, b := open(t, postgres.Options{}), open(t, postgres.Options{})
	if a.Channel() == b.Channel() {
		t.Fatalf("schemas %s and %s share channel %s", a.Schema(), b.Schema(), a.Channel())
	}
	rec := newWakeRecorder()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Listen(ctx, rec.params()) //nolint:errcheck // nil on cancel
	}()
	defer func() { stop(); <-done }()
	rec.expect(t, "")
	if _, err := b.Insert(context.Background(), []driver.InsertParams{insertParams("b-only", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	// The marker travels as a notification, as b's would (see
	// TestListenNotifiesReadyTasks).
	insertInTx(t, a, true, insertParams("a-marker", time.Time{}))
	rec.expect(t, "a-marker")
}

func TestChannelNameFitsLongSchemas(t *testing.T) {
	t.Parallel()
	d := open(t, postgres.Options{Schema: testdb.PostgresSchema(t, strings.Repeat("s", 50))}) // 63 bytes
	if n := len(d.Channel()); n > 63 {
		t.Fatalf("channel %q has %d bytes, PostgreSQL allows 63", d.Channel(), n)
	}
	rec := newWakeRecorder()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Listen(ctx, rec.params()) //nolint:errcheck // nil on cancel
	}()
	defer func() { stop(); <-done }()
	rec.expect(t, "")
	if _, err := d.Insert(context.Background(), []driver.InsertParams{insertParams("q", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	rec.expect(t, "q")
}
