package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/internal/testdb"
)

// TestServeRedisGate: keel serve with [redis] url (here KEEL_REDIS_URL)
// gates keyed enqueues: the second enqueue of a key is a gate hit, counted
// in keel_redis_gate_total.
func TestServeRedisGate(t *testing.T) {
	t.Parallel()
	testdb.Require(t, testdb.Redis)
	bin := buildKeel(t)
	dir := t.TempDir()
	prefix := fmt.Sprintf("keeltest:serve:%d:", time.Now().UnixNano())
	s := startServe(t, bin, []string{"KEEL_REDIS_URL=redis://" + testdb.RedisAddr() + "/0", "KEEL_REDIS_PREFIX=" + prefix, "KEEL_REDIS_TIMEOUT=5s"},
		"--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0")
	if !strings.Contains(s.stderr.String(), "Redis first gate on") {
		t.Errorf("no log line of the gate:\n%s", s.stderr.String())
	}
	first := s.cli(t, bin, "enqueue", "email", `{"to":"a@example.com"}`, "--idempotency-key", "k1")
	second := s.cli(t, bin, "enqueue", "email", `{"to":"a@example.com"}`, "--idempotency-key", "k1")
	if !strings.Contains(second, "task 1 already exists") {
		t.Errorf("second enqueue: %q (first %q), want a duplicate", second, first)
	}
	resp, err := http.Get(s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`keel_redis_gate_total{result="acquired"} 1`, `keel_redis_gate_total{result="hit"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(string(body), "keel_redis_gate"))
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestServeRedisGateFrozen: with Redis hung (SIGSTOP),
// keel serve's keyed enqueues wait for the gate at most its timeout, and
// go-redis's own log lines do not flood stderr: they go through keel's
// logger, at most one a minute.
func TestServeRedisGateFrozen(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	srv := testdb.PrivateRedis(t)
	const timeout = 50 * time.Millisecond
	s := startServe(t, bin, []string{"KEEL_REDIS_URL=redis://" + srv.Addr + "/0", "KEEL_REDIS_TIMEOUT=" + timeout.String()},
		"--db", filepath.Join(t.TempDir(), "keel.db"), "--listen", "127.0.0.1:0")
	enqueue := func(key string) time.Duration {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.addr+"/v1/tasks", strings.NewReader(`{"type":"email","payload":{"to":"a@example.com"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			t.Fatalf("enqueue %s: %d %s", key, resp.StatusCode, body)
		}
		return took
	}
	for i := range 5 { // the pool holds connections when Redis freezes
		enqueue(fmt.Sprint("warm-", i))
	}
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var took []time.Duration
	for round := range 4 {
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				d := enqueue(fmt.Sprint("frozen-", round, "-", i))
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	slices.Sort(took)
	p99 := took[(len(took)*99+99)/100-1]
	t.Logf("enqueue through keel serve with Redis frozen: p50 %v, p99 %v", took[len(took)/2], p99)
	// Without the gate's bound a call waits for go-redis's own read timeout
	// (3s) or longer; the second on top of the gate's timeout is the
	// request and the insert on a loaded machine, not a speed figure.
	if p99 >= timeout+time.Second {
		t.Errorf("enqueue p99 %v with Redis frozen, want under the gate's timeout %v + 1s (all: %v)", p99, timeout, took)
	}
	if err := srv.Thaw(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the abandoned calls end
	for _, l := range strings.Split(s.stderr.String(), "\n") {
		if strings.HasPrefix(l, "redis: ") {
			t.Errorf("go-redis logged around keel's logger: %s", l)
		}
	}
	if n := strings.Count(s.stderr.String(), "keel: go-redis:"); n > 1 {
		t.Errorf("%d go-redis lines logged, want at most one a minute:\n%s", n, grepLines(s.stderr.String(), "go-redis"))
	}
}
