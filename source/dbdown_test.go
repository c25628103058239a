package source

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/brokertest"
	"github.com/keelq/keel/internal/testdb"
)

// proxy forwards TCP connections to a database server until stopped: while
// it is stopped the database is gone for whoever connects through it
// (connections cut, new ones refused), as when the server stops, without
// stopping the server other tests share.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

// stop cuts every connection and refuses new ones.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// start accepts connections again on the same address.
func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Errorf("proxy: listen again on %s: %v", p.addr, err)
		return
	}
	p.serve(ln)
}

// TestDatabaseDown consumes RabbitMQ messages while the database is gone
// for 10 s: the batches that cannot be stored are handed back and
// redelivered, no message is lost, and before every ack the batch's tasks
// are read back from the database over a connection of the test's own.
func TestDatabaseDown(t *testing.T) {
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			var drv driver.Driver
			var committed func(ctx context.Context, orders []int) (int, error)
			switch db {
			case "postgres":
				schema := testdb.PostgresSchema(t, "keel_srcdown")
				u, _ := url.Parse(testdb.PostgresDSN())
				p := startProxy(t, u.Host)
				direct, err := pgxpool.New(t.Context(), testdb.PostgresDSN())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(direct.Close)
				u.Host = p.addr
				drv, err = postgres.Open(t.Context(), u.String(), postgres.Options{Schema: schema})
				if err != nil {
					t.Fatal(err)
				}
				committed = func(ctx context.Context, orders []int) (int, error) {
					var n int
					err := direct.QueryRow(ctx, fmt.Sprintf(`SELECT count(DISTINCT payload->>'order_id') FROM %q.keel_tasks
						WHERE type = 'order.import' AND (payload->>'order_id')::int = ANY($1)`, schema), orders).Scan(&n)
					return n, err
				}
				dbDown(t, drv, p, committed)
			case "mysql":
				_, dsn := testdb.MySQLDatabase(t, "keel_srcdown")
				cfg, _ := gomysql.ParseDSN(dsn)
				p := startProxy(t, cfg.Addr)
				direct, err := sql.Open("mysql", dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { direct.Close() })
				cfg.Addr = p.addr
				cfg.Timeout = 2 * time.Second
				drv, err = mysql.Open(t.Context(), cfg.FormatDSN(), mysql.Options{})
				if err != nil {
					t.Fatal(err)
				}
				committed = func(ctx context.Context, orders []int) (int, error) {
					ids := make([]string, len(orders))
					for i, o := range orders {
						ids[i] = fmt.Sprint(o)
					}
					var n int
					err := direct.QueryRowContext(ctx, `SELECT count(DISTINCT CAST(JSON_EXTRACT(payload, '$.order_id') AS SIGNED))
						FROM keel_tasks WHERE type = 'order.import'
						AND CAST(JSON_EXTRACT(payload, '$.order_id') AS SIGNED) IN (`+strings.Join(ids, ",")+`)`).Scan(&n)
					return n, err
				}
				dbDown(t, drv, p, committed)
			}
		})
	}
}

func dbDown(t *testing.T, drv driver.Driver, p *proxy, committed func(context.Context, []int) (int, error)) {
	t.Cleanup(func() { drv.Close() })
	c := newClient(t, drv)
	queue := brokertest.RabbitQueue(t)
	s, err := New(c, Config{Name: "orders", Kind: KindRabbitMQ, URL: rabbitURL, Queue: queue, Type: "order.import",
		Key: "/order_id", Logger: testLogger(t), NackDelay: 500 * time.Millisecond, Batch: 50})
	if err != nil {
		t.Fatal(err)
	}
	var early atomic.Int32
	s.testBeforeAck = func(batch []*delivery) {
		orders := map[int]bool{}
		for _, d := range batch {
			var o order
			if json.Unmarshal(d.body, &o) == nil {
				orders[o.N] = true
			}
		}
		list := make([]int, 0, len(orders))
		for o := range orders {
			list = append(list, o)
		}
		n, err := committed(context.Background(), list)
		if err != nil {
			t.Errorf("read the batch's tasks back: %v", err)
			return
		}
		if n != len(list) {
			early.Add(1)
			t.Errorf("a batch of %d orders was about to be acknowledged with only %d of their tasks committed", len(list), n)
		}
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())

	// 3,000 orders over about 15 s; the database is gone from 3 s to 13 s.
	const total = 3000
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := 0; i < total; i += 100 {
			var bodies [][]byte
			for n := i; n < i+100; n++ {
				b, _ := json.Marshal(order{N: n})
				bodies = append(bodies, b)
			}
			if err := brokertest.PublishRabbit(context.Background(), queue, bodies); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)
	p.stop()
	time.Sleep(10 * time.Second)
	p.start()
	<-published
	waitFor(t, 2*time.Minute, "every order to become a task", func() bool { return typeCount(t, c) == total })
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := brokertest.RabbitReady(t, queue); n != 0 {
		t.Errorf("%d messages left in the broker", n)
	}
	st := s.Stats()
	if st.Nacked == 0 {
		t.Errorf("no batch was handed back while the database was gone: the outage did not reach the source (%+v)", st)
	}
	// A commit cut off by the outage is ambiguous: the server may have
	// committed while the client saw "conn closed". The broker then
	// redelivers, the unique index finds the key, and the source counts a
	// duplicate; the database still holds each order once (typeCount above).
	if st.Accepted+st.Duplicate != total {
		t.Errorf("accepted %d + duplicate %d, want %d", st.Accepted, st.Duplicate, total)
	}
	if n := typeCount(t, c); n != total {
		t.Errorf("%d tasks after the source stopped, want %d", n, total)
	}
	t.Logf("stats after the outage: %+v", st)
}
