package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// countingDriver counts the reads an estimate makes and passes them on to
// the real driver.
type countingDriver struct {
	driver.Driver
	reads atomic.Int64 // Counts, Minutes, ListSettings, ListNodes
	ahead atomic.Int64 // CountAhead
}

func (d *countingDriver) Counts(ctx context.Context) ([]driver.CountRow, error) {
	d.reads.Add(1)
	return d.Driver.Counts(ctx)
}

func (d *countingDriver) Minutes(ctx context.Context, since time.Time) ([]driver.MinuteRow, error) {
	d.reads.Add(1)
	return d.Driver.Minutes(ctx, since)
}

func (d *countingDriver) ListSettings(ctx context.Context) ([]driver.Setting, error) {
	d.reads.Add(1)
	return d.Driver.ListSettings(ctx)
}

func (d *countingDriver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	d.reads.Add(1)
	return d.Driver.ListNodes(ctx)
}

func (d *countingDriver) CountAhead(ctx context.Context, p driver.AheadParams) (int64, error) {
	d.ahead.Add(1)
	return d.Driver.CountAhead(ctx, p)
}

// warmQueue gives queue "default" a history (10 tasks of about 20 ms,
// run by a worker that then stops) and registers a live node with 2
// workers for it, so that its pending tasks get estimates; nothing runs
// them afterwards, so their line stays as it is.
func warmQueue(t testing.TB, b *bundle) {
	t.Helper()
	ctx := context.Background()
	h := keel.NewHandlers()
	keel.Handle(h, typeEmail, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	w, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 10)
	for i := range ids {
		info, err := b.client.Enqueue(ctx, typeEmail, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = info.ID
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		done := 0
		for _, id := range ids {
			info, err := b.client.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.State == keel.StateSucceeded {
				done++
			}
		}
		if done == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d warm-up tasks ran after 30s", done, len(ids))
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w.Stop(stopCtx) //nolint:errcheck // always nil
	liveNode(t, b.drv)
}

// liveNode registers (or renews) a node that runs 2 tasks of queue
// "default" at once, as a worker on another machine would.
func liveNode(t testing.TB, drv driver.Driver) {
	t.Helper()
	now := time.Now()
	if err := drv.RegisterNode(context.Background(), driver.NodeParams{Name: "eta-node", Host: "test", PID: 1,
		Queues: []string{keel.DefaultQueue}, Workers: map[string]int{keel.DefaultQueue: 2}, StartedAt: now, Now: now}); err != nil {
		t.Fatal(err)
	}
}

// TestETABatch: every pending task of POST /v1/tasks/batch carries its
// ETA, on every database. Behind 5 tasks of priority 0 and 3 of priority
// 5, a batch of 1,000 (every tenth at priority 5, the rest at 0) gets
// ETAs that grow in submission order within each priority; the
// estimates, made for the whole batch with the live counters read once
// and two index reads per priority, place each task exactly where
// Client.Estimate places it alone (the priority-5 tasks behind the 3
// before them and each other, the priority-0 ones behind all 108 of
// those and each other), and the API's ETAs are as far apart as they are.
func TestETABatch(t *testing.T) {
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		warmQueue(t, b)
		for i := range 8 {
			b.enqueue(t, fmt.Sprintf(`{"type":%q,"priority":%d}`, typeEmail, 5*(i/5)))
		}

		const n = 1000
		items := make([]string, n)
		for i := range items {
			typ, priority := typeEmail, 0
			if i%3 == 0 {
				typ = typeReport // no history: counted at the queue's mean
			}
			if i%10 == 9 {
				priority = 5
			}
			items[i] = fmt.Sprintf(`{"type":%q,"priority":%d}`, typ, priority)
		}
		var resp BatchResponse
		posted := time.Now()
		b.call(t, "POST", "/v1/tasks/batch", `{"tasks":[`+strings.Join(items, ",")+`]}`).ok(t, http.StatusCreated, &resp)
		took := time.Since(posted)
		if len(resp.Tasks) != n {
			t.Fatalf("%d tasks answered, want %d", len(resp.Tasks), n)
		}
		last := map[int]time.Time{}
		for i, task := range resp.Tasks {
			if task.ETAStatus != string(keel.ETAEstimated) || task.ETA == nil || task.ETAFinish == nil {
				t.Fatalf("task #%d (%d): eta_status %q, eta %v, eta_finish %v", i, task.ID, task.ETAStatus, task.ETA, task.ETAFinish)
			}
			if prev, ok := last[task.Priority]; ok && task.ETA.Before(prev) {
				t.Fatalf("task #%d (priority %d): eta %v before the previous one's %v", i, task.Priority, *task.ETA, prev)
			}
			last[task.Priority] = *task.ETA
		}
		if first := resp.Tasks[0].ETA; !last[0].After(first.Add(time.Second)) {
			t.Fatalf("priority 0: first eta %v, last %v: the line does not grow", *first, last[0])
		}
		if !last[5].Before(*resp.Tasks[0].ETA) {
			t.Fatalf("the last priority-5 task (eta %v) is not ahead of the first priority-0 one (%v)", last[5], *resp.Tasks[0].ETA)
		}

		// The library's estimates, at one fixed time: the batch's at once
		// with a bounded number of reads, and the same tasks one by one.
		infos := make([]*keel.TaskInfo, n)
		for i, task := range resp.Tasks {
			infos[i] = &keel.TaskInfo{ID: task.ID, Type: task.Type, Queue: task.Queue, Priority: task.Priority,
				State: keel.State(task.State), RunAt: task.RunAt}
		}
		at := time.Now()
		cd := &countingDriver{Driver: b.drv}
		est, err := keel.NewClient(keel.Config{Driver: cd, Types: []string{typeEmail, typeReport}, Logger: b.log,
			Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		many, err := est.EstimateMany(context.Background(), infos)
		if err != nil {
			t.Fatal(err)
		}
		manyTook := time.Since(start)
		// The snapshot (counters, history, settings, nodes), the fresh
		// counters, the history once more (a type here has not run: its
		// first run time may have come in since the snapshot) and two
		// index reads for each of the two priorities: the same for any n.
		if reads, ahead := cd.reads.Load(), cd.ahead.Load(); reads > 6 || ahead != 4 {
			t.Errorf("estimating %d tasks read %d tables and the index %d times; want at most 6 and 4", n, reads, ahead)
		}
		seen := map[int]int64{}
		for i, e := range many {
			p := infos[i].Priority
			want := 3 + seen[p]
			if p == 0 {
				want += 5 + n/10
			}
			seen[p]++
			if e == nil || e.Status != keel.ETAEstimated || e.Ahead != want {
				t.Fatalf("task #%d (priority %d): %+v, want %d ahead", i, p, e, want)
			}
		}
		cd.ahead.Store(0)
		start = time.Now()
		samples := []int{0, 1, 2, 9, 19, 500, 989, 998, 999}
		for _, i := range samples {
			one, err := est.Estimate(context.Background(), infos[i])
			if err != nil {
				t.Fatal(err)
			}
			if *one != *many[i] {
				t.Errorf("task #%d: alone %+v, in the batch %+v", i, one, many[i])
			}
		}
		eachTook := time.Since(start) / time.Duration(len(samples))
		if ahead := cd.ahead.Load(); ahead != int64(len(samples)) {
			t.Errorf("%d tasks estimated one by one read the index %d times", len(samples), ahead)
		}
		// The API estimated the same line: its ETAs are as far apart.
		for _, i := range samples {
			api, lib := resp.Tasks[i].ETA.Sub(*resp.Tasks[0].ETA), many[i].Start.Sub(many[0].Start)
			if (api - lib).Abs() > time.Millisecond+lib.Abs()/100 {
				t.Errorf("task #%d: the API's eta is %v after the first task's, the library's %v", i, api, lib)
			}
		}
		t.Logf("POST of %d tasks with their ETAs: %v; their estimates at once: %v; one task alone: %v (%d alone: %v)",
			n, took.Round(time.Millisecond), manyTook.Round(time.Microsecond), eachTook.Round(time.Microsecond),
			n, time.Duration(n)*eachTook.Round(time.Millisecond))
	})
}

// BenchmarkBatchETA times a batch of 1,000 tasks of one priority on each
// database, in a queue with a history and a live worker (so that every
// task is estimated): POST /v1/tasks/batch, which answers each task with
// its ETA; Client.EnqueueMany alone, the same insert without HTTP or
// estimates; EstimateMany of a batch, the estimates the POST adds; and
// Estimate of each of its tasks one by one, as the batch would cost
// estimated task by task. Every op adds 1,000 tasks to the line the next
// ones are placed behind. Run one database at a time, a few ops each:
//
//	go test ./server -run '^$' -bench 'BatchETA/sqlite' -benchtime 10x
func BenchmarkBatchETA(b *testing.B) {
	const n = 1000
	items := make([]string, n)
	specs := make([]keel.TaskSpec, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"type":%q}`, typeEmail)
		specs[i] = keel.TaskSpec{Type: typeEmail}
	}
	body := `{"tasks":[` + strings.Join(items, ",") + `]}`
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		b.Run(db, func(b *testing.B) {
			ctx := context.Background()
			drv, _, _ := openBenchDriver(b, db)
			log := slog.New(slog.DiscardHandler)
			c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{typeEmail, typeReport}, Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(c, Options{Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			warmQueue(b, &bundle{client: c, drv: drv, log: log})
			var last []*keel.TaskInfo
			post := func() {
				resp, err := http.Post(srv.URL+"/v1/tasks/batch", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				var br BatchResponse
				err = json.NewDecoder(resp.Body).Decode(&br)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated || len(br.Tasks) != n || br.Tasks[n-1].ETA == nil {
					b.Fatalf("POST /v1/tasks/batch: %d, %v", resp.StatusCode, err)
				}
			}
			enqueue := func() {
				if last, err = c.EnqueueMany(ctx, specs); err != nil {
					b.Fatal(err)
				}
			}
			post() // warm the connections and the snapshot
			b.Run("post", func(b *testing.B) {
				liveNode(b, drv)
				for b.Loop() {
					post()
				}
			})
			b.Run("enqueue-many", func(b *testing.B) {
				liveNode(b, drv)
				for b.Loop() {
					enqueue()
				}
			})
			b.Run("estimate-many", func(b *testing.B) {
				liveNode(b, drv)
				for b.Loop() {
					b.StopTimer()
					enqueue()
					b.StartTimer()
					es, err := c.EstimateMany(ctx, last)
					if err != nil || es[n-1].Status != keel.ETAEstimated {
						b.Fatalf("EstimateMany: %v", err)
					}
				}
			})
			b.Run("estimate-each", func(b *testing.B) {
				liveNode(b, drv)
				for b.Loop() {
					b.StopTimer()
					enqueue()
					b.StartTimer()
					for i, info := range last {
						if i%100 == 99 { // this takes longer than a node's heartbeat stays live
							b.StopTimer()
							liveNode(b, drv)
							b.StartTimer()
						}
						if e, err := c.Estimate(ctx, info); err != nil || e.Status != keel.ETAEstimated {
							b.Fatalf("Estimate: %+v %v", e, err)
						}
					}
				}
			})
		})
	}
}
