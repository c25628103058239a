package postgres_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
)

// quiet is how long a test watches for wake-ups or claims that should not
// come: long against a notification's few milliseconds.
const quiet = 500 * time.Millisecond

// ownPool returns a pool of at most maxConns connections that records the
// backend pid of every connection it makes, and a driver on a fresh
// schema on it.
func ownPool(t *testing.T, maxConns int32) (*postgres.Driver, *pgxpool.Pool, func() []uint32) {
	t.Helper()
	testdb.Require(t, testdb.Postgres)
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	var mu sync.Mutex
	var pids []uint32
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		mu.Lock()
		pids = append(pids, c.PgConn().PID())
		mu.Unlock()
		return nil
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	schema := open(t, postgres.Options{}).Schema() // created, and dropped at the end
	d, err := postgres.New(context.Background(), p, postgres.Options{Schema: schema})
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		p.Close()
	})
	return d, p, func() []uint32 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(pids)
	}
}

// listen runs d.Listen with rec until the test ends.
func listen(t *testing.T, d *postgres.Driver, rec *wakeRecorder) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Listen(ctx, rec.params()) //nolint:errcheck // nil on cancel
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// TestListenHoldsOnePoolConnection: the listening connection is one the
// driver's pool made (its AfterConnect saw it), counted as acquired while
// any Listen runs, one for all the Listen calls of a driver, and handed
// back to the pool, no longer listening, when the last one ends.
func TestListenHoldsOnePoolConnection(t *testing.T) {
	t.Parallel()
	d, p, pids := ownPool(t, 4)
	a, b := newWakeRecorder(), newWakeRecorder()
	stopA := listen(t, d, a)
	a.expect(t, "")
	pid := listenerPID(t, d.Schema(), 0)
	if !slices.Contains(pids(), uint32(pid)) {
		t.Fatalf("listening backend %d is not one of the pool's connections %v", pid, pids())
	}
	if n := p.Stat().AcquiredConns(); n != 1 {
		t.Fatalf("%d pool connections acquired while listening, want 1", n)
	}
	stopB := listen(t, d, b)
	b.expect(t, "") // joined a session that listens
	if n := p.Stat().AcquiredConns(); n != 1 {
		t.Fatalf("%d pool connections acquired by two Listen calls on one driver, want 1", n)
	}
	if got := listenerPID(t, d.Schema(), 0); got != pid {
		t.Fatalf("second Listen moved the listener from backend %d to %d", pid, got)
	}
	stopA()
	if _, err := d.Insert(context.Background(), []driver.InsertParams{insertParams("after-a", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	b.expect(t, "after-a")
	stopB()
	if n := p.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d pool connections still acquired after Listen ended, want 0", n)
	}
	var name string
	var listening bool
	err := pool.QueryRow(context.Background(), `SELECT application_name, query LIKE 'LISTEN %'
		FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&name, &listening)
	if err != nil {
		t.Fatalf("the listening connection did not go back to the pool: %v", err)
	}
	if name == "keel_listener:"+d.Schema() || listening {
		t.Fatalf("connection back in the pool still named %q, listening %v", name, listening)
	}
}

// TestListenPoolOfOneConnection: a pool of one connection is not held for
// LISTEN (every query would wait for it): Listen says why, writes through
// the driver still go through and still wake the driver's listeners.
func TestListenPoolOfOneConnection(t *testing.T) {
	t.Parallel()
	d, p, _ := ownPool(t, 1)
	rec := newWakeRecorder()
	listen(t, d, rec)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec.mu.Lock()
		errs := slices.Clone(rec.errs)
		rec.mu.Unlock()
		if len(errs) > 0 {
			if !errors.Is(errs[0], postgres.ErrPoolTooSmall) || len(errs) != 1 {
				t.Fatalf("Listen reported %v, want ErrPoolTooSmall once", errs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Listen on a pool of one connection reported nothing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Insert(ctx, []driver.InsertParams{insertParams("q", time.Time{})}); err != nil {
		t.Fatalf("insert beside a listener on a pool of one: %v", err)
	}
	rec.expect(t, "", "q")
	if n := p.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections held by the listener, want 0", n)
	}
}

// countingDriver is a worker client's view of a driver: it counts the
// client's claims, and hands on the wake-ups Listen gives wakeDelay late,
// so that any other wake-up of the same enqueue (a direct one) shows as a
// claim of its own.
type countingDriver struct {
	*postgres.Driver
	claims    atomic.Int64
	connected chan struct{} // closed at the first wake-up from Listen
	once      sync.Once
}

const wakeDelay = 200 * time.Millisecond

func (c *countingDriver) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	c.claims.Add(1)
	return c.Driver.Claim(ctx, p)
}

func (c *countingDriver) Listen(ctx context.Context, p driver.ListenParams) error {
	var timers sync.WaitGroup
	defer timers.Wait()
	wake := p.Wake
	p.Wake = func(q string) {
		c.once.Do(func() { close(c.connected) })
		timers.Add(1)
		time.AfterFunc(wakeDelay, func() {
			defer timers.Done()
			wake(q)
		})
	}
	return c.Driver.Listen(ctx, p)
}

// worker starts a client that works the default queue of d, polling every
// 30s, and reports the tasks it starts; it returns once the client's
// first claims are over.
func worker(t *testing.T, d *postgres.Driver, started chan<- int64) (*keel.Client, *countingDriver) {
	t.Helper()
	cd := &countingDriver{Driver: d, connected: make(chan struct{})}
	h := keel.NewHandlers()
	keel.Handle(h, "ping", func(ctx context.Context, task *keel.Task[struct{}]) error {
		started <- task.ID
		return nil
	})
	c, err := keel.NewClient(keel.Config{Driver: cd, Handlers: h, PollInterval: farPoll, Logger: logTo(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(ctx) //nolint:errcheck // always nil
	})
	select {
	case <-cd.connected:
	case <-time.After(20 * time.Second):
		t.Fatal("the client's listener did not connect")
	}
	time.Sleep(wakeDelay + quiet) // the claims of the start and of the first wake-up
	return c, cd
}

// claimsAfter runs write, waits until the worker started task want (0:
// none is expected) and then a quiet spell, and returns how many claims
// each driver counted meanwhile.
func claimsAfter(t *testing.T, started <-chan int64, write func() int64, cds ...*countingDriver) []int64 {
	t.Helper()
	before := make([]int64, len(cds))
	for i, cd := range cds {
		before[i] = cd.claims.Load()
	}
	if id := write(); id != 0 {
		select {
		case got := <-started:
			if got != id {
				t.Fatalf("started task %d, want %d", got, id)
			}
		case <-time.After(pickupLimit):
			t.Fatalf("task %d not started within %v by workers polling every %v", id, pickupLimit, farPoll)
		}
	}
	time.Sleep(wakeDelay + quiet)
	out := make([]int64, len(cds))
	for i, cd := range cds {
		out[i] = cd.claims.Load() - before[i]
	}
	return out
}

// TestEnqueueWakesOwnWorkerOnce: a client's enqueue of a ready task wakes
// its own worker once (one claim), not also directly, and a listener of
// another driver on the schema (another process) once; a delayed task
// still starts by its timer; a task enqueued in the caller's transaction
// wakes them only once committed, and not at all when rolled back.
func TestEnqueueWakesOwnWorkerOnce(t *testing.T) {
	t.Parallel()
	d := open(t, postgres.Options{})
	other, err := postgres.New(context.Background(), pool, postgres.Options{Schema: d.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	rec := newWakeRecorder()
	listen(t, other, rec)
	rec.expect(t, "")
	started := make(chan int64, 10)
	c, cd := worker(t, d, started)
	ctx := context.Background()
	// otherOnce checks that the other process was woken for want exactly
	// once ("": not at all) since the last check.
	otherOnce := func(want string) {
		t.Helper()
		var got []string
		for len(rec.wakes) > 0 {
			got = append(got, <-rec.wakes)
		}
		if (want == "" && len(got) != 0) || (want != "" && !slices.Equal(got, []string{want})) {
			t.Fatalf("another process was woken for %q, want %q", got, want)
		}
	}
	enqueue := func(opts ...keel.Option) func() int64 {
		return func() int64 {
			info, err := c.Enqueue(ctx, "ping", struct{}{}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			return info.ID
		}
	}
	if n := claimsAfter(t, started, enqueue(), cd); n[0] != 1 {
		t.Fatalf("an enqueue made its own worker claim %d times, want 1", n[0])
	}
	otherOnce("default")
	if n := claimsAfter(t, started, enqueue(keel.Delay(300*time.Millisecond)), cd); n[0] != 1 {
		t.Fatalf("a delayed enqueue made its own worker claim %d times, want 1", n[0])
	}
	otherOnce("") // left to the poll in other processes
	for _, commit := range []bool{false, true} {
		var tx pgx.Tx
		n := claimsAfter(t, started, func() int64 {
			var err error
			if tx, err = d.Pool().Begin(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.EnqueueTx(ctx, tx, "ping", struct{}{}); err != nil {
				t.Fatal(err)
			}
			return 0
		}, cd)
		if n[0] != 0 {
			t.Fatalf("an uncommitted EnqueueTx made the worker claim %d times, want 0", n[0])
		}
		otherOnce("")
		n = claimsAfter(t, started, func() int64 {
			if !commit {
				if err := tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				return 0
			}
			var id int64
			if err := tx.QueryRow(ctx, `SELECT max(id) FROM `+d.Schema()+`.keel_tasks`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			return id
		}, cd)
		if want := map[bool]int64{false: 0, true: 1}[commit]; n[0] != want {
			t.Fatalf("commit %v of an EnqueueTx made the worker claim %d times, want %d", commit, n[0], want)
		}
		otherOnce(map[bool]string{false: "", true: "default"}[commit])
	}
}

// TestClientsSharingADriverEachWakeOnce: two clients on one driver in one
// process, both working the queue: an enqueue through either wakes each
// once.
func TestClientsSharingADriverEachWakeOnce(t *testing.T) {
	t.Parallel()
	d := open(t, postgres.Options{})
	started := make(chan int64, 10)
	a, ca := worker(t, d, started)
	b, cb := worker(t, d, started)
	for _, c := range []*keel.Client{a, b} {
		n := claimsAfter(t, started, func() int64 {
			info, err := c.Enqueue(context.Background(), "ping", struct{}{})
			if err != nil {
				t.Fatal(err)
			}
			return info.ID
		}, ca, cb)
		if n[0] != 1 || n[1] != 1 {
			t.Fatalf("an enqueue made the two clients claim %v times, want [1 1]", n)
		}
	}
}
