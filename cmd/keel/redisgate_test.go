package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
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
