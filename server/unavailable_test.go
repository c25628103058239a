package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/testdb"
)

// tcpProxy forwards connections to a database server until Cut, which
// closes its port and every connection through it: the database becomes
// unreachable for whoever connects through the proxy, and only for them.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Cut)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src) //nolint:errcheck // ends when either side closes
	dst.Close()
	src.Close()
}

// Cut closes the proxy's port and every connection through it.
func (p *tcpProxy) Cut() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// serverAddr is the host:port of the test server for db.
func serverAddr(t *testing.T, db string) string {
	t.Helper()
	switch db {
	case "postgres":
		u, err := url.Parse(testdb.PostgresDSN())
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	case "mysql":
		cfg, err := gomysql.ParseDSN(testdb.MySQLDSN())
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Addr
	}
	t.Fatalf("no server address for %s", db)
	return ""
}

// TestDatabaseUnavailable: when the database cannot be reached, an
// enqueue is answered 503 with Retry-After, so the caller retries with the
// same key, and the library returns ErrUnavailable; not a 500. Every other
// route that needs the database answers the same.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			proxy := startProxy(t, serverAddr(t, db))
			b := setupVia(t, db, proxy.addr(), Options{})
			task := b.enqueue(t, `{"type":"email.send","payload":{"n":1}}`)
			proxy.Cut()

			for _, c := range []struct{ method, path, body string }{
				{"POST", "/v1/tasks", `{"type":"email.send","payload":{"n":2}}`},
				{"POST", "/v1/tasks", `{"type":"email.send","payload":{"n":3}}`}, // again, on a new connection
				{"POST", "/v1/tasks/batch", `{"tasks":[{"type":"email.send"}]}`},
				{"GET", "/v1/tasks/" + itoa(task.ID), ""},
				{"GET", "/v1/tasks", ""},
				// Every other route that reads or writes the database too.
				{"POST", "/v1/tasks/" + itoa(task.ID) + "/cancel", ""},
				{"POST", "/v1/tasks/" + itoa(task.ID) + "/retry", ""},
				{"GET", "/v1/dead", ""},
				{"POST", "/v1/dead/requeue", `{"type":"email.send"}`},
				{"POST", "/v1/dead/purge", `{"type":"email.send"}`},
				{"GET", "/v1/queues", ""},
				{"POST", "/v1/queues/default/pause", ""},
				{"PATCH", "/v1/queues/default", `{"concurrency":2}`},
				{"GET", "/v1/types", ""},
				{"POST", "/v1/types/email.send/pause", ""},
				{"PATCH", "/v1/types/email.send", `{"max_attempts":3}`},
				{"GET", "/v1/stats", ""},
				{"GET", "/v1/nodes", ""},
			} {
				res := b.call(t, c.method, c.path, c.body, "Idempotency-Key", idemFor(c.path))
				res.problem(t, http.StatusServiceUnavailable, "the database is unavailable")
				if ra := res.header.Get("Retry-After"); ra != "2" {
					t.Fatalf("%s %s: Retry-After %q, want 2", c.method, c.path, ra)
				}
			}
			// The process's own facts need no database.
			var sys System
			b.call(t, "GET", "/v1/system", "").ok(t, http.StatusOK, &sys)
			if sys.Pool == nil {
				t.Fatal("GET /v1/system with the database unreachable: no pool")
			}
			if _, err := b.client.Enqueue(t.Context(), typeEmail, map[string]int{"n": 4}); !errors.Is(err, keel.ErrUnavailable) {
				t.Fatalf("library enqueue with the database unreachable: %v, want ErrUnavailable", err)
			}
		})
	}
}

func idemFor(path string) string {
	if strings.HasSuffix(path, "/v1/tasks") {
		return "retry-me"
	}
	return ""
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
