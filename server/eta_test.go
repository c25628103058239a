package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// TestETAScenario is seed 003's scenario: 300 tasks of 0.2s at concurrency
// 2 submitted in one burst to a fresh server, whose own workers run them.
// Every ETA given at submit after the 10th task must be within 25% of the
// real wait (from submit to start), or 300ms for waits under 1.2s (the
// scheduler's own jitter). When the burst has drained, 100 more tasks
// queue up and then 20 of a higher priority arrive: their ETAs must count
// only the higher-priority tasks ahead, at the rate the first burst
// measured (the old estimate divided a fixed window and told the last
// task of a second burst 9 times its real wait).
func TestETAScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 40s")
	}
	forEachDB(t, func(t *testing.T, db string) {
		const work = "eta.work"
		var mu sync.Mutex
		started := map[int64]time.Time{}
		h := keel.NewHandlers()
		keel.Handle(h, work, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
			mu.Lock()
			started[task.ID] = time.Now()
			mu.Unlock()
			select {
			case <-time.After(200 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		b := setup(t, db, Options{}, func(c *keel.Config) {
			c.Handlers, c.PollInterval = h, 50*time.Millisecond
			c.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 2}}
		})
		if err := b.client.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopWorker(t, b.client) })

		type submit struct {
			id     int64
			at     time.Time
			eta    *time.Time
			status string
		}
		send := func(n, priority int) submit {
			t.Helper()
			at := time.Now()
			var task Task
			b.call(t, "POST", "/v1/tasks", fmt.Sprintf(`{"type":%q,"payload":{"n":%d},"priority":%d}`, work, n, priority)).
				ok(t, http.StatusCreated, &task)
			return submit{id: task.ID, at: at, eta: task.ETA, status: task.ETAStatus}
		}
		waitStarted := func(subs []submit, within time.Duration) {
			t.Helper()
			deadline := time.Now().Add(within)
			for {
				mu.Lock()
				n := 0
				for _, s := range subs {
					if _, ok := started[s.id]; ok {
						n++
					}
				}
				mu.Unlock()
				if n == len(subs) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d tasks started after %v", n, len(subs), within)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		// check compares the ETAs of subs from the 11th on with the real
		// starts. Before the first task of the burst has finished there is
		// no run time to go by: those submits may say "unknown", nothing
		// else.
		check := func(what string, subs []submit, from int) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			// The first run time is stored a moment after the handler
			// returns (the completer batches outcomes).
			firstEnd := started[subs[0].id].Add(300 * time.Millisecond)
			worst, unknown := 0.0, 0
			for i := from; i < len(subs); i++ {
				s := subs[i]
				if s.eta == nil && s.status == "unknown" && s.at.Before(firstEnd) {
					unknown++
					continue
				}
				if s.eta == nil {
					t.Fatalf("%s: task %d (#%d) got no eta at submit (%q), %v after the first task finished",
						what, s.id, i+1, s.status, s.at.Sub(firstEnd))
				}
				real, told := started[s.id].Sub(s.at), s.eta.Sub(s.at)
				tol := math.Max(0.25*real.Seconds(), 0.3)
				off := math.Abs(told.Seconds() - real.Seconds())
				if off > tol {
					t.Errorf("%s: task #%d was told it starts in %v, started after %v", what, i+1, told.Round(time.Millisecond), real.Round(time.Millisecond))
				}
				worst = math.Max(worst, off/math.Max(real.Seconds(), 1e-3))
			}
			t.Logf("%s: worst error %.0f%% of the real wait; %d submits before the first task finished had no estimate yet",
				what, 100*worst, unknown)
		}

		burst := make([]submit, 300)
		for i := range burst {
			burst[i] = send(i, 0)
		}
		waitStarted(burst, 90*time.Second)
		check("first burst", burst, 10)

		// The burst has drained; 100 tasks wait, then 20 jump the line.
		for i := range 100 {
			send(1000+i, 0)
		}
		urgent := make([]submit, 20)
		for i := range urgent {
			urgent[i] = send(2000+i, 10)
		}
		waitStarted(urgent, 30*time.Second)
		check("higher priority after a burst", urgent, 0)
	})
}
