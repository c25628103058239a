package source

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/brokertest"
	"github.com/keelq/keel/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test brokers (the test command starts them when down; KEEL_TEST_RABBITMQ
// and KEEL_TEST_NATS name others).
var (
	rabbitURL = testdb.RabbitURL()
	natsURL   = testdb.NATSURL()
)

var databases = []string{"sqlite", "postgres", "mysql"}

// openDriver opens a fresh database of kind db, closed when the test ends.
func openDriver(t testing.TB, db string) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var d driver.Driver
	var err error
	switch db {
	case "sqlite":
		d, err = sqlite.Open(ctx, testdb.SQLiteFile(t), sqlite.Options{})
	case "postgres":
		d, err = postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: testdb.PostgresSchema(t, "keel_src")})
	case "mysql":
		_, dsn := testdb.MySQLDatabase(t, "keel_src")
		d, err = mysql.Open(ctx, dsn, mysql.Options{})
	}
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// newClient is a client of drv that may enqueue the type "order.import"
// (declared, no handler here: the tasks stay pending for the checks).
func newClient(t testing.TB, drv driver.Driver) *keel.Client {
	t.Helper()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"order.import"}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// cutter opens TCP connections and cuts them all on demand: a network
// failure as the source sees it.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	cuts  atomic.Int32
}

func (c *cutter) dial(network, addr string) (net.Conn, error) {
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.conns = append(c.conns, conn)
	c.mu.Unlock()
	return conn, nil
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
	c.cuts.Add(1)
}

// order is a message body; N is the natural key.
type order struct {
	N    int    `json:"order_id"`
	Note string `json:"note"`
}

// workload is what the exactly-once tests publish: distinct orders, 10 %
// of them twice, and bad messages (not JSON, no key) that must be kept.
type workload struct {
	distinct, repeats, bad int
	bodies                 [][]byte
}

func newWorkload(distinct, bad int) *workload {
	w := &workload{distinct: distinct, repeats: distinct / 10, bad: bad}
	var again [][]byte // the copies, published a few messages later
	for i := range distinct {
		b, _ := json.Marshal(order{N: i, Note: "keel"})
		w.bodies = append(w.bodies, b)
		if i%10 == 3 {
			again = append(again, b)
		}
		if i%10 == 8 && len(again) > 0 {
			w.bodies = append(w.bodies, again[0])
			again = again[1:]
		}
		if i%(distinct/bad) == 0 {
			if (i/(distinct/bad))%2 == 0 {
				w.bodies = append(w.bodies, fmt.Appendf(nil, "not json %d", i))
			} else {
				w.bodies = append(w.bodies, fmt.Appendf(nil, `{"no_order_id": %d}`, i))
			}
		}
	}
	w.bodies = append(w.bodies, again...)
	return w
}

// check fails unless the type holds exactly one task per distinct
// order, and the rejected table the bad messages.
func (w *workload) check(t *testing.T, c *keel.Client, name string) {
	t.Helper()
	seen := map[int]int{}
	var before int64
	for {
		page, err := c.List(t.Context(), keel.Filter{Type: "order.import", BeforeID: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, task := range page {
			var o order
			if err := json.Unmarshal(task.Payload, &o); err != nil {
				t.Fatalf("task %d payload %s: %v", task.ID, task.Payload, err)
			}
			seen[o.N]++
			before = task.ID // newest first
		}
	}
	if len(seen) != w.distinct {
		t.Errorf("%d distinct orders have tasks, want %d", len(seen), w.distinct)
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("order %d has %d tasks, want 1", n, k)
		}
	}
	rej, err := c.Rejected(t.Context(), keel.RejectedFilter{Source: name, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(rej) != w.bad {
		t.Errorf("%d rejected messages stored, want %d", len(rej), w.bad)
	}
	for _, r := range rej {
		if r.Reason == "" || len(r.Body) == 0 || r.Type != "order.import" {
			t.Errorf("rejected message %d: reason %q, body %q, type %q", r.ID, r.Reason, r.Body, r.Type)
		}
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func rejectedCount(t testing.TB, c *keel.Client, source string) int {
	rej, err := c.Rejected(t.Context(), keel.RejectedFilter{Source: source, Limit: 1000})
	if err != nil {
		return -1
	}
	return len(rej)
}

func typeCount(t testing.TB, c *keel.Client) int64 {
	counts, err := c.Counts(t.Context())
	if err != nil {
		return -1
	}
	var n int64
	for _, byState := range counts["default"] {
		n += byState
	}
	return n
}

// TestRabbitMQExactlyOnce publishes 10,000 orders, 10 % of them twice, and
// 40 bad messages, and cuts the source's connection twice between a
// batch's commit and its ack: every distinct order becomes exactly one
// task, the bad messages are stored, and every message is acknowledged.
func TestRabbitMQExactlyOnce(t *testing.T) {
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, openDriver(t, db))
			queue := brokertest.RabbitQueue(t)
			w := newWorkload(10000, 40)
			if err := brokertest.PublishRabbit(t.Context(), queue, w.bodies); err != nil {
				t.Fatal(err)
			}
			s, err := New(c, Config{Name: "orders", Kind: KindRabbitMQ, URL: rabbitURL, Queue: queue,
				Type: "order.import", Key: "/order_id", Logger: testLogger(t), Reconnect: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			exactlyOnce(t, c, s, w, func() int { return brokertest.RabbitReady(t, queue) })
		})
	}
}

// exactlyOnce runs s over w's published messages with two cut
// connections and checks the outcome; ready tells how many messages the
// broker still holds once s stopped.
func exactlyOnce(t *testing.T, c *keel.Client, s *Source, w *workload, ready func() int) {
	t.Helper()
	cut := &cutter{}
	s.testDial = cut.dial
	var batches atomic.Int32
	s.testBeforeAck = func([]*delivery) {
		if n := batches.Add(1); n == 10 || n == 40 {
			cut.cut()
		}
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			s.Stop(context.Background())
		}
	}()
	// Done once the tasks and rejected messages are stored, the broker
	// holds nothing unacknowledged that it knows of, and the source's
	// counters stood still for a poll (an ack cut halfway is not counted,
	// so they need not add up to what was published).
	last := Stats{}
	waitFor(t, 2*time.Minute, "the tasks and rejected messages to be stored and every message acknowledged", func() bool {
		st := s.Stats()
		settled := st.Accepted == last.Accepted && st.Duplicate == last.Duplicate && st.Rejected == last.Rejected
		last = st
		return settled && typeCount(t, c) == int64(w.distinct) && rejectedCount(t, c, s.Name()) == w.bad && ready() == 0
	})
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if cut.cuts.Load() != 2 {
		t.Fatalf("the connection was cut %d times, want 2", cut.cuts.Load())
	}
	w.check(t, c, s.Name())
	if n := ready(); n != 0 {
		t.Errorf("%d messages are still in the broker after the source stopped; every one should be acknowledged", n)
	}
	st := s.Stats()
	// A batch whose ack was cut is redelivered and counted as duplicates.
	if st.Accepted > int64(w.distinct) || st.Accepted < int64(w.distinct-2*s.cfg.Inflight*s.cfg.Batch) {
		t.Errorf("accepted %d, want %d less at most the batches in flight at the two cuts", st.Accepted, w.distinct)
	}
	if st.Duplicate < int64(w.repeats) {
		t.Errorf("duplicates %d, want at least the %d repeats", st.Duplicate, w.repeats)
	}
	infos, err := c.Sources(t.Context())
	if err != nil || len(infos) != 1 || infos[0].State != StateStopped || infos[0].Accepted != st.Accepted {
		t.Errorf("stored report %+v (err %v), want one stopped source with accepted %d", infos, err, st.Accepted)
	}
}

// natsStream is a stream name of the test's own, deleted when it ends. It
// skips the test when NATS is unreachable (fails it under CI=true).
func natsStream(t testing.TB) (stream string, js jetstream.JetStream) {
	t.Helper()
	testdb.Require(t, testdb.NATS)
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream = brokertest.UniqueName("KEELTEST_")
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), stream) })
	return stream, js
}

func publishNATS(t testing.TB, js jetstream.JetStream, subject string, bodies [][]byte) {
	t.Helper()
	var futures []jetstream.PubAckFuture
	for i, b := range bodies {
		// At most 500 unacknowledged at once: a loaded machine's server
		// acks slowly, and past the client's limit of pending messages
		// PublishAsync fails with "stalled" (a CI run met it).
		if i%500 == 0 && i > 0 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatalf("publish: %d messages not acknowledged in 30s", js.PublishAsyncPending())
			}
		}
		f, err := js.PublishAsync(subject, b)
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish %d: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("publish %d: no ack", i)
		}
	}
}

// TestNATSExactlyOnce is TestRabbitMQExactlyOnce through a durable
// JetStream consumer.
func TestNATSExactlyOnce(t *testing.T) {
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, openDriver(t, db))
			stream, js := natsStream(t)
			w := newWorkload(10000, 40)
			publishNATS(t, js, stream+".orders", w.bodies)
			s, err := New(c, Config{Name: "orders", Kind: KindNATS, URL: natsURL, Stream: stream, Consumer: "keel",
				Type: "order.import", Key: "/order_id", Logger: testLogger(t), Reconnect: 50 * time.Millisecond,
				AckWait: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			exactlyOnce(t, c, s, w, func() int {
				info, err := js.Consumer(context.Background(), stream, "keel")
				if err != nil {
					t.Fatal(err)
				}
				ci, err := info.Info(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return int(ci.NumPending) + ci.NumAckPending
			})
		})
	}
}
