package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// TestETAMixedTypes: in a queue where slow and fast types wait together,
// every task submitted after the first one finished starts within
// max(25 %, 0.5 s) of the ETA its submit answered, on every database:
//   - seed 003's mix: reports of 0.2 s drain at 2 workers when
//     20 notifications of about 1 ms arrive at priority 10 in a burst; the
//     queue's start rate, set by the reports, once told each of them about
//     0.1 s per notification ahead (the 20th about 2 s), and they started
//     at once;
//   - two types of 0.05 s and 0.5 s: 12 slow tasks, then 12 fast ones,
//     queue behind each other, where a fast task waits for the slow ones
//     ahead (at the queue's start rate, set by the fast ones that ran
//     first, it was told a tenth of that).
func TestETAMixedTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 15s")
	}
	forAllDBs(t, func(t *testing.T, db string) {
		runs := map[string]time.Duration{"eta.report": 200 * time.Millisecond, "eta.notify": time.Millisecond,
			"eta.slow": 500 * time.Millisecond, "eta.fast": 50 * time.Millisecond}
		var mu sync.Mutex
		started, finished := map[int64]time.Time{}, map[int64]time.Time{}
		h := keel.NewHandlers()
		for typ, d := range runs {
			keel.Handle(h, typ, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
				mu.Lock()
				started[task.ID] = time.Now()
				mu.Unlock()
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
				mu.Lock()
				finished[task.ID] = time.Now()
				mu.Unlock()
				return nil
			})
		}
		b := setup(t, db, Options{}, func(c *keel.Config) {
			c.Handlers, c.PollInterval = h, 50*time.Millisecond
			c.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 2}}
		})
		if err := b.client.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopWorker(t, b.client) })

		type submit struct {
			id   int64
			typ  string
			at   time.Time
			eta  *time.Time
			what string
		}
		send := func(typ string, priority int) submit {
			t.Helper()
			at := time.Now()
			var task Task
			b.call(t, "POST", "/v1/tasks", fmt.Sprintf(`{"type":%q,"priority":%d}`, typ, priority)).ok(t, http.StatusCreated, &task)
			return submit{id: task.ID, typ: typ, at: at, eta: task.ETA, what: task.ETAStatus}
		}
		waitFor := func(what string, done func() bool) {
			t.Helper()
			for deadline := time.Now().Add(60 * time.Second); !done(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not after 60s", what)
				}
			}
		}
		allStarted := func(subs []submit) func() bool {
			return func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, s := range subs {
					if _, ok := started[s.id]; !ok {
						return false
					}
				}
				return true
			}
		}
		check := func(scenario string, subs []submit) {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			worst := 0.0
			for i, s := range subs {
				if s.eta == nil {
					t.Errorf("%s: task #%d (%s) got no ETA: %q", scenario, i+1, s.typ, s.what)
					continue
				}
				real, told := started[s.id].Sub(s.at), s.eta.Sub(s.at)
				bound := max(real/4, 500*time.Millisecond)
				worst = max(worst, (told-real).Abs().Seconds()/max(real.Seconds(), 1e-3))
				if (told - real).Abs() > bound {
					t.Errorf("%s: task #%d (%s) was told it starts in %v, started after %v (bound ±%v)",
						scenario, i+1, s.typ, told.Round(time.Millisecond), real.Round(time.Millisecond), bound.Round(time.Millisecond))
				}
			}
			t.Logf("%s: %d estimates, worst error %.0f%% of the real wait", scenario, len(subs), 100*worst)
		}

		// Seed 003's mix, on a queue that has run both types before (a type
		// that never ran is estimated at the queue's mean run time).
		warm := []submit{send("eta.notify", 10), send("eta.notify", 10)}
		waitFor("the warm-up ran", func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, a := finished[warm[0].id]
			_, b := finished[warm[1].id]
			return a && b
		})
		time.Sleep(200 * time.Millisecond) // their run times are stored
		reports := make([]submit, 60)
		for i := range reports {
			reports[i] = send("eta.report", 0)
		}
		waitFor("the first report finished", func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, ok := finished[reports[0].id]
			return ok
		})
		var later []submit
		for range 20 {
			later = append(later, send("eta.notify", 10))
		}
		for range 10 {
			later = append(later, send("eta.report", 0))
		}
		waitFor("every task started", allStarted(append(reports, later...)))
		check("reports and notifications", later)

		// Two types of 0.05 s and 0.5 s: the fast ones run first, then 12
		// slow and 12 fast queue behind each other.
		warm = nil
		for range 10 {
			warm = append(warm, send("eta.fast", 0))
		}
		warm = append(warm, send("eta.slow", 0), send("eta.slow", 0))
		// Every warm-up task finished, not only started: on a loaded machine
		// the slow ones could still be running 600ms after they started,
		// and the first slow tasks below then waited for them too.
		waitFor("the warm-up ran", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range warm {
				if _, ok := finished[s.id]; !ok {
					return false
				}
			}
			return true
		})
		time.Sleep(200 * time.Millisecond) // their run times are stored
		var mixed []submit
		for range 12 {
			mixed = append(mixed, send("eta.slow", 0))
		}
		for range 12 {
			mixed = append(mixed, send("eta.fast", 0))
		}
		waitFor("every task started", allStarted(mixed))
		check("slow and fast", mixed)
	})
}
