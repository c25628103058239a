package httptarget_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

// request is what a test target received.
type request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// target is an HTTP server that records every request and answers with
// respond; n counts the requests to that path, from 1.
type target struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []request
	release chan struct{} // closed when the test ends: hanging handlers return
}

func newTarget(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) *target {
	t.Helper()
	tg := &target{release: make(chan struct{})}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("target: read request body: %v", err)
		}
		tg.mu.Lock()
		tg.reqs = append(tg.reqs, request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		n := 0
		for _, q := range tg.reqs {
			if q.Path == r.URL.Path {
				n++
			}
		}
		tg.mu.Unlock()
		respond(w, r, n)
	}))
	t.Cleanup(tg.Close)
	t.Cleanup(func() { close(tg.release) }) // runs before Close
	return tg
}

// requests returns the requests received for path.
func (tg *target) requests(path string) []request {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []request
	for _, q := range tg.reqs {
		if q.Path == path {
			out = append(out, q)
		}
	}
	return out
}

// hang blocks until the client gives up or the test ends.
func (tg *target) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-tg.release:
	}
}

// start registers targets through register and starts a worker client on
// a new SQLite database; retry delays have no jitter.
func start(t *testing.T, register func(h *keel.Handlers)) *keel.Client {
	t.Helper()
	h := keel.NewHandlers()
	register(h)
	c := keeltest.NewClient(t, keel.Config{Handlers: h, BackoffJitter: -1})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func mustRegister(t *testing.T, h *keel.Handlers, taskType string, tg httptarget.Target, opts ...keel.Option) {
	t.Helper()
	if err := httptarget.Register(h, taskType, tg, opts...); err != nil {
		t.Fatalf("Register(%q): %v", taskType, err)
	}
}

func enqueue(t *testing.T, c *keel.Client, taskType string, payload any) *keel.TaskInfo {
	t.Helper()
	info, err := c.Enqueue(context.Background(), taskType, payload)
	if err != nil {
		t.Fatalf("enqueue %s: %v", taskType, err)
	}
	return info
}

// waitRetrying waits until the task's first attempt failed and it waits
// for its retry (or is dead), and returns it.
func waitRetrying(t *testing.T, c *keel.Client, id int64) *keel.TaskInfo {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ti, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(ti.Errors) > 0 && ti.State != keel.StateRunning {
			return ti
		}
		if ti.State == keel.StateSucceeded || ti.State == keel.StateCancelled {
			t.Fatalf("task %d %s, want a failed attempt; errors %v", id, ti.State, ti.Errors)
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d: no failed attempt after 10s: state %s attempt %d", id, ti.State, ti.Attempt)
		}
	}
}

// freePort returns a local address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
