package metrics_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/metrics"
)

// A library user registers the Collector in their own registry (or
// prometheus.DefaultRegisterer) and serves it with promhttp as usual.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "keel-metrics-example-")
	defer os.RemoveAll(dir)
	drv, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"email.send"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}

	m, err := metrics.New(metrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Watch(c); err != nil { // before Start and the first Enqueue
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	for range 2 {
		if _, err := c.Enqueue(ctx, "email.send", map[string]string{"to": "ada@example.com"}, keel.UniqueBy("welcome:ada")); err != nil {
			log.Fatal(err)
		}
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keel_idempotency_hits_total Enqueues in this process that found the task already there (UniqueBy, IdempotencyKey).
# TYPE keel_idempotency_hits_total counter
keel_idempotency_hits_total{queue="default",type="email.send"} 1
# HELP keel_tasks_enqueued_total Tasks this process enqueued (inserted; duplicates are keel_idempotency_hits_total).
# TYPE keel_tasks_enqueued_total counter
keel_tasks_enqueued_total{queue="default",type="email.send"} 1
`), "keel_tasks_enqueued_total", "keel_idempotency_hits_total")
	fmt.Println("metrics as expected:", err == nil)
	// Output: metrics as expected: true
}
