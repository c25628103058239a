package keel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/proctest"
	"github.com/keelq/keel/internal/testdb"
)

// gateDriver opens a fresh database of kind db, closed when the test ends.
func gateDriver(t *testing.T, db string) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var d driver.Driver
	var err error
	switch db {
	case "sqlite":
		d, err = sqlite.Open(ctx, testdb.SQLiteFile(t), sqlite.Options{})
	case "postgres":
		d, err = postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: testdb.PostgresSchema(t, "keel_gate")})
	case "mysql":
		_, dsn := testdb.MySQLDatabase(t, "keel_gate")
		d, err = mysql.Open(ctx, dsn, mysql.Options{})
	}
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// testRedis is the test Redis server's address; the test skips when it is
// unreachable (fails under CI=true).
func testRedis(t *testing.T) string {
	t.Helper()
	testdb.Require(t, testdb.Redis)
	return testdb.RedisAddr()
}

// gateClient returns a client of drv gated by Redis at addr, under a key
// prefix of its own.
func gateClient(t *testing.T, drv driver.Driver, addr string, mod ...func(*keel.Config)) *keel.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	var b [6]byte
	rand.Read(b[:])
	// Generous bounds: a loaded machine must not turn the counts below
	// into timings.
	g := &keel.RedisGate{Client: rdb, Prefix: "keeltest:" + hex.EncodeToString(b[:]) + ":",
		TTL: time.Minute, Timeout: 5 * time.Second, Wait: 20 * time.Second}
	cfg := keel.Config{Driver: drv, Types: []string{"t.gate"},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), RedisGate: g}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := keel.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// submitAll enqueues the same UniqueBy task n times at once and returns
// how many answers were duplicates, failing on any error or on two ids.
func submitAll(t *testing.T, c *keel.Client, n int) (dups int) {
	t.Helper()
	var mu sync.Mutex
	ids := map[int64]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			info, err := c.Enqueue(t.Context(), "t.gate", payload{N: 7}, keel.UniqueBy("order-7"))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			ids[info.ID] = true
			if info.Duplicate {
				dups++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(ids) != 1 {
		t.Fatalf("%d submissions made %d tasks, want 1", n, len(ids))
	}
	return dups
}

// dbHits sums the idempotency hits the database recorded (inserts that
// reached it and found the key held) since the test began.
func dbHits(t *testing.T, c *keel.Client, since time.Time) int64 {
	t.Helper()
	h, err := c.History(t.Context(), since.Truncate(time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range h {
		n += p.Hits
	}
	return n
}

// TestRedisGate: 100 concurrent identical submissions through the gate
// make one task, and the duplicates are answered without reaching the
// database's insert.
func TestRedisGate(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t0 := time.Now()
			drv := gateDriver(t, db)
			c := gateClient(t, drv, testRedis(t))
			if dups := submitAll(t, c, 100); dups != 99 {
				t.Errorf("%d duplicates, want 99", dups)
			}
			st := c.RedisGateStats()
			if st.Acquired != 1 || st.Hits+st.Fallbacks+st.Skipped != 99 || st.Hits < 90 {
				t.Errorf("gate stats %+v: want 1 acquired and at least 90 of 99 hits", st)
			}
			// Only the submissions the gate did not answer reached the insert.
			if got, want := dbHits(t, c, t0), st.Fallbacks+st.Skipped; got != want {
				t.Errorf("database saw %d duplicate inserts, want %d (stats %+v)", got, want, st)
			}
			// A later duplicate is a gate hit too: the key is kept for its TTL.
			info, err := c.Enqueue(t.Context(), "t.gate", payload{N: 7}, keel.UniqueBy("order-7"))
			if err != nil || !info.Duplicate || c.RedisGateStats().Hits != st.Hits+1 {
				t.Errorf("later duplicate: %+v, %v, stats %+v", info, err, c.RedisGateStats())
			}
			// Another payload under the same explicit key is still the
			// database's conflict, not a gate hit.
			if _, err := c.Enqueue(t.Context(), "t.gate", payload{N: 1}, keel.IdempotencyKey("k")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Enqueue(t.Context(), "t.gate", payload{N: 2}, keel.IdempotencyKey("k")); !errors.Is(err, keel.ErrIdempotencyConflict) {
				t.Errorf("another payload under a held key: %v, want ErrIdempotencyConflict", err)
			}
			// A failed insert releases the gate key it set: a client with
			// fresh gate keys sets "k", fails on the conflict and releases
			// it, so its next submission sets it again (no hit on a key
			// whose insert failed).
			c2 := gateClient(t, drv, testRedis(t))
			if _, err := c2.Enqueue(t.Context(), "t.gate", payload{N: 2}, keel.IdempotencyKey("k")); !errors.Is(err, keel.ErrIdempotencyConflict) {
				t.Fatalf("conflict through a fresh gate: %v", err)
			}
			info, err = c2.Enqueue(t.Context(), "t.gate", payload{N: 1}, keel.IdempotencyKey("k"))
			if st := c2.RedisGateStats(); err != nil || !info.Duplicate || st.Acquired != 2 || st.Hits != 0 {
				t.Errorf("after a released key: %+v, %v, stats %+v; want a duplicate through a second acquire", info, err, st)
			}
		})
	}
}

// TestRedisGateReleasedKey: a task cancelled while its gate key lives
// released its key in the database: a resubmission finds the Redis key
// held, no holder in the database, and inserts a new task after Wait.
func TestRedisGateReleasedKey(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			c := gateClient(t, gateDriver(t, db), testRedis(t), func(cfg *keel.Config) { cfg.RedisGate.Wait = 50 * time.Millisecond })
			first, err := c.Enqueue(t.Context(), "t.gate", payload{N: 3}, keel.IdempotencyKey("order-3"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Cancel(t.Context(), first.ID); err != nil {
				t.Fatal(err)
			}
			again, err := c.Enqueue(t.Context(), "t.gate", payload{N: 3}, keel.IdempotencyKey("order-3"))
			if err != nil || again.Duplicate || again.ID == first.ID {
				t.Fatalf("resubmission after cancel: %+v, %v; want a new task", again, err)
			}
			if st := c.RedisGateStats(); st.Acquired != 1 || st.Fallbacks != 1 || st.Hits != 0 {
				t.Errorf("stats %+v: want 1 acquired, 1 fallback", st)
			}
		})
	}
}

// TestRedisGateRedisStopped: with the gate's Redis gone, submissions skip
// the gate and the database's unique index still makes one task.
func TestRedisGateRedisStopped(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			addr, stop := privateRedis(t)
			logs := &proctest.Buffer{}
			c := gateClient(t, gateDriver(t, db), addr, func(cfg *keel.Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, t.Output()), nil))
			})
			if dups := submitAll(t, c, 10); dups != 9 {
				t.Errorf("with Redis: %d duplicates, want 9", dups)
			}
			if st := c.RedisGateStats(); st.Acquired != 1 || st.Skipped != 0 {
				t.Errorf("with Redis: stats %+v", st)
			}
			stop()
			if dups := submitAll(t, c, 100); dups != 100 {
				t.Errorf("Redis stopped: %d duplicates, want 100", dups)
			}
			if st := c.RedisGateStats(); st.Skipped != 100 {
				t.Errorf("Redis stopped: stats %+v, want 100 skipped", st)
			}
			if n := strings.Count(logs.String(), "Redis gate skipped"); n != 1 {
				t.Errorf("%d warnings for 100 skips, want 1 (at most one a minute)", n)
			}
			// A new task still goes in without Redis.
			info, err := c.Enqueue(t.Context(), "t.gate", payload{N: 8}, keel.UniqueBy("order-8"))
			if err != nil || info.Duplicate {
				t.Errorf("new task without Redis: %+v, %v", info, err)
			}
		})
	}
}

// TestRedisGateRedisFrozen: with the gate's Redis hung
// (SIGSTOP: connections open, nothing answered), each submission waits for
// the gate at most its Timeout, then inserts as without it. The client is
// the one docs/idempotency.md shows, and a plain one: the gate's bound must not
// depend on how the client was built.
func TestRedisGateRedisFrozen(t *testing.T) {
	for _, name := range []string{"documented", "plain"} {
		t.Run(name, func(t *testing.T) {
			const timeout = 50 * time.Millisecond
			srv := testdb.PrivateRedis(t)
			opts := &redis.Options{Addr: srv.Addr}
			if name == "documented" {
				opts.ContextTimeoutEnabled = true
			}
			rdb := redis.NewClient(opts)
			t.Cleanup(func() { rdb.Close() })
			c, err := keel.NewClient(keel.Config{Driver: gateDriver(t, "sqlite"), Types: []string{"t.gate"},
				Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
				RedisGate: &keel.RedisGate{Client: rdb, Prefix: "keeltest:frozen:", Timeout: timeout}})
			if err != nil {
				t.Fatal(err)
			}
			// Warm up: the pool holds connections when Redis freezes.
			for i := range 5 {
				if _, err := c.Enqueue(t.Context(), "t.gate", payload{N: i}, keel.UniqueBy(fmt.Sprint("warm-", i))); err != nil {
					t.Fatal(err)
				}
			}
			if st := c.RedisGateStats(); st.Acquired != 5 {
				t.Fatalf("before the freeze: %+v, want 5 acquired", st)
			}
			if err := srv.Freeze(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Thaw() })
			// Callers at once and one after another: 4 rounds of 10.
			var mu sync.Mutex
			var took []time.Duration
			for round := range 4 {
				var wg sync.WaitGroup
				for i := range 10 {
					wg.Go(func() {
						start := time.Now()
						_, err := c.Enqueue(t.Context(), "t.gate", payload{N: i}, keel.UniqueBy(fmt.Sprint("frozen-", round, "-", i)))
						d := time.Since(start)
						if err != nil {
							t.Errorf("enqueue with Redis frozen: %v", err)
						}
						mu.Lock()
						took = append(took, d)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			slices.Sort(took)
			p99 := took[(len(took)*99+99)/100-1]
			t.Logf("enqueue with Redis frozen: p50 %v, p99 %v, max %v", took[len(took)/2], p99, took[len(took)-1])
			// Without the gate's bound a call waits for go-redis's own read
			// timeout (3s) or longer; the second on top of Timeout is the
			// database's insert on a loaded machine, not a speed figure.
			if p99 >= timeout+time.Second {
				t.Errorf("enqueue p99 %v with Redis frozen, want under Timeout %v + 1s (all: %v)", p99, timeout, took)
			}
			if st := c.RedisGateStats(); st.Skipped != 40 {
				t.Errorf("stats %+v, want 40 skipped", st)
			}
			// Thawed, the gate works again.
			if err := srv.Thaw(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// privateRedis starts a redis-server of the test's own and returns its
// address and a stop function (also run when the test ends).
func privateRedis(t *testing.T) (string, func()) {
	t.Helper()
	s := testdb.PrivateRedis(t)
	return s.Addr, s.Kill
}

// A Redis gate in front of the database's idempotency check: the second
// submission of a key is answered from the first one's task, without an
// insert. Redis unreachable would only skip the gate.
func ExampleRedisGate() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()

	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"invoice.send"},
		RedisGate: &keel.RedisGate{Client: rdb,
			Prefix: fmt.Sprintf("example:%d:", time.Now().UnixNano()), // default "keel:gate:"
			TTL:    time.Minute, Timeout: time.Second}})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		info, err := c.Enqueue(ctx, "invoice.send", map[string]int{"invoice": 42}, keel.UniqueBy("invoice-42"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.ID, info.Duplicate)
	}
	st := c.RedisGateStats()
	fmt.Println("acquired", st.Acquired, "hits", st.Hits, "skipped", st.Skipped)
	// Output:
	// 1 false
	// 1 true
	// acquired 1 hits 1 skipped 0
}
