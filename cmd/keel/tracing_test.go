package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/internal/proctest"
)

// TestServeExportsTraces: keel serve with [tracing] sends the enqueue and
// attempt spans of a task to the OTLP/HTTP endpoint, in the trace of the
// request that enqueued it, at the latest when it stops (the flush), and
// the HTTP target receives the trace context.
func TestServeExportsTraces(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var exported [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			t.Errorf("collector: %s %s, want POST /v1/traces", r.Method, r.URL.Path)
		}
		mu.Lock()
		exported = append(exported, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	traceparents := make(chan string, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparents <- r.Header.Get("traceparent")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()

	dir := t.TempDir()
	path := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
listen = "127.0.0.1:0"
shutdown_timeout = "10s"
[database]
db = %q
[engine]
poll_interval = "50ms"
[tracing]
otlp_endpoint = %q
service_name = "keel-test"
[types.hook]
url = %q
`, filepath.Join(dir, "keel.db"), collector.URL, target.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &proctest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, func() {}, cfg, stderr) }()
	addr := ""
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("keel serve did not start:\n%s", stderr.String())
		}
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("POST", addr+"/v1/tasks", strings.NewReader(`{"type":"hook"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("enqueue: HTTP %d", resp.StatusCode)
	}
	select {
	case tp := <-traceparents:
		if !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Fatalf("the target got traceparent %q, want trace %s", tp, traceID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the target got no request")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}

	// OTLP protobuf: the trace id as 16 raw bytes, names and values as
	// plain strings.
	mu.Lock()
	all := bytes.Join(exported, nil)
	mu.Unlock()
	id, _ := hex.DecodeString(traceID)
	for _, want := range [][]byte{id, []byte("keel.enqueue hook"), []byte("keel.attempt hook"), []byte("keel-test")} {
		if !bytes.Contains(all, want) {
			t.Errorf("the collector did not receive %q (%d exports, %d bytes)", want, len(exported), len(all))
		}
	}
}
