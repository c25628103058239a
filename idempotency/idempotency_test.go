package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/idempotency"
	"github.com/keelq/keel/internal/testdb"
)

// drivers open a fresh database per test on each real driver.
var drivers = map[string]func(t *testing.T) driver.Driver{
	"sqlite": func(t *testing.T) driver.Driver {
		d, err := sqlite.Open(context.Background(), testdb.SQLiteFile(t), sqlite.Options{})
		return closing(t, d, err)
	},
	"postgres": func(t *testing.T) driver.Driver {
		d, err := postgres.Open(context.Background(), testdb.PostgresDSN(), postgres.Options{Schema: testdb.PostgresSchema(t, "keel_idem")})
		return closing(t, d, err)
	},
	"mysql": func(t *testing.T) driver.Driver {
		_, dsn := testdb.MySQLDatabase(t, "keel_idem")
		d, err := mysql.Open(context.Background(), dsn, mysql.Options{})
		return closing(t, d, err)
	},
}

func closing[D driver.Driver](t *testing.T, d D, err error) driver.Driver {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// forEachDriver runs fn against a server whose handler is made idempotent
// on each driver.
func forEachDriver(t *testing.T, fn func(t *testing.T, drv driver.Driver)) {
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}

func serve(t *testing.T, drv driver.Driver, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(wrap(t, drv, h))
	t.Cleanup(srv.Close)
	return srv
}

func wrap(t *testing.T, drv driver.Driver, h http.Handler) http.Handler {
	t.Helper()
	m, err := idempotency.New(drv, idempotency.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(h)
}

// direct runs a request through h in this goroutine (no client: Go's
// transport refuses some bad header values, and retries a request with an
// Idempotency-Key when the connection drops) and returns the recorder and
// what h panicked with.
func direct(h http.Handler, key, body string) (rec *httptest.ResponseRecorder, panicked any) {
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	req.Header[idempotency.Header] = []string{key}
	defer func() { panicked = recover() }()
	h.ServeHTTP(rec, req)
	return rec, nil
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, url, method, key, body string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(idempotency.Header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// counting answers 201 with a body naming the call's number.
func counting(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Order", fmt.Sprint(n))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d,"got":%q}`, n, b)
	})
}

func TestReplay(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		srv := serve(t, drv, counting(&calls))
		first := do(t, srv.URL+"/orders", "POST", "key-1", `{"sku":"a"}`)
		if first.status != 201 || first.header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("first: %d %v", first.status, first.header)
		}
		again := do(t, srv.URL+"/orders", "POST", "key-1", `{"sku":"a"}`)
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", calls.Load())
		}
		if again.status != 201 || again.body != first.body || again.header.Get("X-Order") != "1" ||
			again.header.Get("Content-Type") != "application/json" || again.header.Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("replay %d %v %q, want first's %d %q", again.status, again.header, again.body, first.status, first.body)
		}
		// The same key on another route is another entry.
		other := do(t, srv.URL+"/refunds", "POST", "key-1", `{"sku":"a"}`)
		if other.status != 201 || calls.Load() != 2 || other.header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("other route: %d, %d calls", other.status, calls.Load())
		}
	})
}

func TestClientErrorStored(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		srv := serve(t, drv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			http.Error(w, "no such sku", http.StatusNotFound)
		}))
		for range 2 {
			if r := do(t, srv.URL+"/orders", "POST", "k", "x"); r.status != 404 || !strings.Contains(r.body, "no such sku") {
				t.Fatalf("got %d %q", r.status, r.body)
			}
		}
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1 (a 4xx is stored)", calls.Load())
		}
	})
}

func TestConcurrentDuplicate(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		entered := make(chan struct{})
		release := make(chan struct{})
		srv := serve(t, drv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			close(entered)
			<-release
			w.WriteHeader(http.StatusAccepted)
			io.WriteString(w, "done")
		}))
		var first response
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			first = do(t, srv.URL+"/orders", "POST", "dup", "x")
		}()
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the first request never reached the handler")
		}
		second := do(t, srv.URL+"/orders", "POST", "dup", "x")
		close(release)
		wg.Wait()
		if second.status != http.StatusConflict || second.header.Get("Retry-After") != "1" ||
			second.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("duplicate in flight: %d %v %q, want 409 problem with Retry-After", second.status, second.header, second.body)
		}
		if first.status != http.StatusAccepted || first.body != "done" {
			t.Fatalf("first: %d %q", first.status, first.body)
		}
		third := do(t, srv.URL+"/orders", "POST", "dup", "x")
		if third.status != http.StatusAccepted || third.body != "done" || third.header.Get(idempotency.ReplayedHeader) != "true" {
			t.Fatalf("retry after the first finished: %d %q %v", third.status, third.body, third.header)
		}
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", calls.Load())
		}
	})
}

func TestBodyMismatch(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		srv := serve(t, drv, counting(&calls))
		do(t, srv.URL+"/orders", "POST", "k", `{"sku":"a"}`)
		r := do(t, srv.URL+"/orders", "POST", "k", `{"sku":"b"}`)
		if r.status != http.StatusUnprocessableEntity || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("other body: %d %q, want 422 problem", r.status, r.body)
		}
		var p struct{ Status int }
		if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.Status != 422 {
			t.Fatalf("problem body %q: %v", r.body, err)
		}
		if calls.Load() != 1 {
			t.Fatalf("handler ran %d times, want 1", calls.Load())
		}
	})
}

func TestFailureReleases(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		h := wrap(t, drv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch calls.Add(1) {
			case 1:
				http.Error(w, "database down", http.StatusServiceUnavailable)
			case 2:
				panic("boom")
			default:
				io.WriteString(w, "ok")
			}
		}))
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		if r := do(t, srv.URL+"/orders", "POST", "k", "x"); r.status != 503 {
			t.Fatalf("first: %d", r.status)
		}
		// The 5xx released the key: the retry runs, and panics; the panic
		// goes on to net/http and releases the key too.
		if _, p := direct(h, "k", "x"); p != "boom" || calls.Load() != 2 {
			t.Fatalf("retry after a 5xx: panic %v, %d calls (want boom, 2)", p, calls.Load())
		}
		r := do(t, srv.URL+"/orders", "POST", "k", "x")
		if r.status != 200 || r.body != "ok" || calls.Load() != 3 {
			t.Fatalf("after the panic: %d %q, %d calls (want 200 ok, 3)", r.status, r.body, calls.Load())
		}
		if r := do(t, srv.URL+"/orders", "POST", "k", "x"); r.header.Get(idempotency.ReplayedHeader) != "true" || calls.Load() != 3 {
			t.Fatalf("the success was not stored: %v, %d calls", r.header, calls.Load())
		}
	})
}

func TestNoHeaderPassesThrough(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		srv := serve(t, drv, counting(&calls))
		for range 2 {
			if r := do(t, srv.URL+"/orders", "POST", "", "x"); r.status != 201 || r.header.Get(idempotency.ReplayedHeader) != "" {
				t.Fatalf("no header: %d %v", r.status, r.header)
			}
		}
		if calls.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2", calls.Load())
		}
	})
}

func TestBadKey(t *testing.T) {
	forEachDriver(t, func(t *testing.T, drv driver.Driver) {
		var calls atomic.Int64
		h := wrap(t, drv, counting(&calls))
		for name, key := range map[string]string{
			"empty":     "",
			"too long":  strings.Repeat("k", 256),
			"non-ASCII": "clé",
			"control":   "a\x01b",
		} {
			if r, _ := direct(h, key, "x"); r.Code != 400 || r.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s: %d %q, want 400 problem", name, r.Code, r.Body)
			}
		}
		// Two headers are refused as well.
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/orders", strings.NewReader("x"))
		req.Header[idempotency.Header] = []string{"a", "b"}
		h.ServeHTTP(rec, req)
		if rec.Code != 400 {
			t.Errorf("two keys: %d, want 400", rec.Code)
		}
		if calls.Load() != 0 {
			t.Fatalf("handler ran %d times on bad keys", calls.Load())
		}
		// The longest valid key works.
		if r, _ := direct(h, strings.Repeat("k", 255), "x"); r.Code != 201 {
			t.Fatalf("255-byte key: %d %q", r.Code, r.Body)
		}
	})
}

func TestLargeResponseNotStored(t *testing.T) {
	var calls atomic.Int64
	drv := drivers["sqlite"](t)
	m, err := idempotency.New(drv, idempotency.Options{MaxBody: 10})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "0123456789")
		io.WriteString(w, "abcdef")
	})))
	defer srv.Close()
	for i := range 2 {
		if r := do(t, srv.URL+"/big", "GET", "k", ""); r.status != 200 || r.body != "0123456789abcdef" {
			t.Fatalf("call %d: %d %q", i, r.status, r.body)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2 (a response over MaxBody is not stored)", calls.Load())
	}
	if r := do(t, srv.URL+"/big", "POST", "k2", strings.Repeat("x", 11)); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("request over MaxBody: %d", r.status)
	}
}

func TestPurge(t *testing.T) {
	drv := drivers["sqlite"](t)
	now := time.Now()
	var calls atomic.Int64
	m, err := idempotency.New(drv, idempotency.Options{TTL: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(counting(&calls)))
	defer srv.Close()
	do(t, srv.URL+"/orders", "POST", "k", "x")
	if n, err := m.Purge(t.Context()); err != nil || n != 0 {
		t.Fatalf("purge before expiry: %d, %v", n, err)
	}
	now = now.Add(time.Hour)
	if n, err := m.Purge(t.Context()); err != nil || n != 1 {
		t.Fatalf("purge after expiry: %d, %v (want 1)", n, err)
	}
}

func TestNewBadOptions(t *testing.T) {
	drv := drivers["sqlite"](t)
	for name, o := range map[string]idempotency.Options{
		"negative TTL":     {TTL: -time.Second},
		"lock over TTL":    {TTL: time.Minute, Lock: time.Hour},
		"negative MaxBody": {MaxBody: -1},
	} {
		if _, err := idempotency.New(drv, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
