package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/internal/brokertest"
	"github.com/keelq/keel/server"
)

// TestServeSourceSurvivesKills: keel serve consumes a RabbitMQ queue into
// an HTTP-target type while 1,000 orders are published, and is SIGKILLed
// twice mid-run. Every order becomes exactly one task, every task reaches
// the target, and the queue ends empty.
func TestServeSourceSurvivesKills(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	const total = 1000
	var mu sync.Mutex
	taskOf := map[int]map[string]bool{} // order -> task ids delivered
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var o struct {
			N int `json:"order_id"`
		}
		if err := json.Unmarshal(body, &o); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		if taskOf[o.N] == nil {
			taskOf[o.N] = map[string]bool{}
		}
		taskOf[o.N][r.Header.Get("Keel-Task-Id")] = true
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(taskOf)
	}

	queue := brokertest.RabbitQueue(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
shutdown_timeout = "5s"
[engine]
poll_interval = "50ms"
lease_ttl = "3s"
heartbeat_interval = "1s"
rescue_interval = "500ms"
[types."order.import"]
url = %q
max_attempts = 10
[[sources]]
name = "orders"
kind = "rabbitmq"
url = %q
queue = %q
type = "order.import"
key = "/order_id"
batch = 50
`, target.URL, brokertest.RabbitURL(), queue)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0", "--config", cfg}
	s := startServe(t, bin, nil, args...)

	// 1,000 orders in 20 publishes of 50, 150 ms apart, with every tenth
	// order published a second time.
	published := make(chan error, 1)
	go func() {
		for i := 0; i < total; i += 50 {
			var bodies [][]byte
			for n := i; n < i+50; n++ {
				b := fmt.Appendf(nil, `{"order_id": %d}`, n)
				bodies = append(bodies, b)
				if n%10 == 0 {
					bodies = append(bodies, b)
				}
			}
			if err := brokertest.PublishRabbit(context.Background(), queue, bodies); err != nil {
				published <- err
				return
			}
			time.Sleep(150 * time.Millisecond)
		}
		published <- nil
	}()
	for _, after := range []int{250, 600} {
		waitUntil(t, time.Minute, fmt.Sprintf("%d orders delivered", after), func() bool { return delivered() >= after })
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-s.exited
		s = startServe(t, bin, nil, args...)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Minute, "every order delivered", func() bool { return delivered() == total })

	var st server.Stats
	waitUntil(t, time.Minute, "every task succeeded", func() bool {
		st = serverStats(t, bin, s)
		return st.Counts["succeeded"] == total
	})
	var all int64
	for _, n := range st.Counts {
		all += n
	}
	if all != total {
		t.Errorf("%d tasks in all (%v), want exactly one per order: %d", all, st.Counts, total)
	}
	mu.Lock()
	for n, ids := range taskOf {
		if len(ids) != 1 {
			t.Errorf("order %d was delivered as %d tasks %v, want 1", n, len(ids), ids)
		}
		if n < 0 || n >= total {
			t.Errorf("order %d was never published", n)
		}
	}
	mu.Unlock()
	// The operator's views: keel sources and keel stats count the orders
	// of the last run, /metrics the source's counters.
	if out := s.cli(t, bin, "sources"); !strings.Contains(out, "orders") || !strings.Contains(out, "running") {
		t.Errorf("keel sources:\n%s", out)
	}
	if out := s.cli(t, bin, "stats"); !strings.Contains(out, "\nsources:\n") {
		t.Errorf("keel stats shows no sources:\n%s", out)
	}
	resp, err := http.Get(s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`keel_source_messages_total{result="accepted",source="orders"}`, `keel_source_ack_seconds_count{source="orders"}`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Stop the server cleanly: its consumer goes, and whatever it had not
	// acknowledged would be back in the queue.
	s.cmd.Process.Signal(os.Interrupt)
	<-s.exited
	if n := brokertest.RabbitReady(t, queue); n != 0 {
		t.Errorf("%d messages left in the queue; every one should have been acknowledged", n)
	}
}

// serverStats reads GET /v1/stats through the CLI.
func serverStats(t *testing.T, bin string, s *served) server.Stats {
	t.Helper()
	var st server.Stats
	if err := json.Unmarshal([]byte(s.cli(t, bin, "stats", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}
