package keel_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

// exampleDB opens a SQLite database in a new temporary directory and
// returns it with a function that closes and removes it.
func exampleDB() (*sqlite.Driver, func()) {
	dir, err := os.MkdirTemp("", "keel-example-")
	if err != nil {
		log.Fatal(err)
	}
	drv, err := sqlite.Open(context.Background(), filepath.Join(dir, "app.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return drv, func() {
		drv.Close()
		os.RemoveAll(dir)
	}
}

// exampleConfig keeps the examples quiet and quick: no logs, short retry
// delays and polling.
func exampleConfig(drv driver.Driver, h *keel.Handlers) keel.Config {
	return keel.Config{
		Driver: drv, Handlers: h,
		Logger:       slog.New(slog.DiscardHandler),
		BackoffBase:  10 * time.Millisecond,
		BackoffMax:   50 * time.Millisecond,
		PollInterval: 10 * time.Millisecond,
	}
}

// exampleWait polls until the task is succeeded, dead or cancelled.
func exampleWait(c *keel.Client, id int64) *keel.TaskInfo {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		t, err := c.Get(context.Background(), id)
		if err != nil {
			log.Fatal(err)
		}
		if t.State == keel.StateSucceeded || t.State == keel.StateDead || t.State == keel.StateCancelled {
			return t
		}
	}
	log.Fatalf("task %d did not finish", id)
	return nil
}

// The whole life of a task: register a handler, start the workers,
// enqueue, and read the stored result.
func Example() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	type Email struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
	}
	h := keel.NewHandlers()
	keel.Handle(h, "email.send", func(ctx context.Context, t *keel.Task[Email]) error {
		// Send the email here; returning an error would retry it.
		return t.SetResult(map[string]string{"sent_to": t.Args.To})
	})
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	info, err := c.Enqueue(ctx, "email.send", Email{To: "ada@example.com", Subject: "Welcome"})
	if err != nil {
		log.Fatal(err)
	}
	t := exampleWait(c, info.ID)
	fmt.Println(t.Type, t.State, "after", t.Attempt, "attempt:", string(t.Result))
	// Output:
	// email.send succeeded after 1 attempt: {"sent_to":"ada@example.com"}
}

// Handle registers a typed handler with defaults for its type. Here a
// flaky first attempt is retried, and a payload the handler cannot serve
// is dead-lettered at once with Permanent.
func ExampleHandle() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	type Resize struct {
		Image  string `json:"image"`
		Format string `json:"format"`
	}
	h := keel.NewHandlers()
	keel.Handle(h, "image.resize", func(ctx context.Context, t *keel.Task[Resize]) error {
		switch {
		case t.Args.Format != "webp" && t.Args.Format != "png":
			return keel.Permanent(fmt.Errorf("unsupported format %q", t.Args.Format))
		case t.Attempt == 1:
			return errors.New("image store: connection reset") // retried with backoff
		}
		return nil
	}, keel.MaxAttempts(3), keel.Timeout(30*time.Second), keel.Priority(5))

	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	for _, r := range []Resize{{"a.jpg", "webp"}, {"b.jpg", "tiff"}} {
		info, err := c.Enqueue(ctx, "image.resize", r)
		if err != nil {
			log.Fatal(err)
		}
		t := exampleWait(c, info.ID)
		fmt.Printf("%s: %s, attempt %d of %d, priority %d\n", r.Image, t.State, t.Attempt, t.MaxAttempts, t.Priority)
		for _, e := range t.Errors {
			fmt.Printf("  attempt %d: %s: %s\n", e.Attempt, e.Outcome, e.Error)
		}
	}
	// Output:
	// a.jpg: succeeded, attempt 2 of 3, priority 5
	//   attempt 1: error: image store: connection reset
	// b.jpg: dead, attempt 1 of 3, priority 5
	//   attempt 1: permanent: permanent: unsupported format "tiff"
}

// An enqueue-only client declares the types it submits; another process
// with handlers runs them. Options set the task's properties.
func ExampleClient_Enqueue() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"report.build"}})
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.Enqueue(ctx, "report.build", map[string]string{"month": "2025-06", "account": "acme"},
		keel.Queue("batch"), keel.Priority(-5), keel.Delay(time.Hour), keel.MaxAttempts(2))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID, info.Type, info.Queue, info.State, info.Priority, info.MaxAttempts)
	fmt.Println("payload:", string(info.Payload)) // stored as canonical JSON
	fmt.Println("scheduled:", info.RunAt.After(info.CreatedAt.Add(59*time.Minute)))

	_, err = c.Enqueue(ctx, "report.mail", nil)
	fmt.Println(errors.Is(err, keel.ErrUnknownType))
	_, err = c.Enqueue(ctx, "report.build", nil, keel.Priority(1e9))
	fmt.Println(errors.Is(err, keel.ErrInvalid))
	// Output:
	// 1 report.build batch pending -5 2
	// payload: {"account":"acme","month":"2025-06"}
	// scheduled: true
	// true
	// true
}

// EnqueueTx stores a task in the caller's transaction: it exists if and
// only if the transaction commits. On SQLite, begin the transaction on the
// driver's DB().
func ExampleClient_EnqueueTx() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()
	db := drv.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)`); err != nil {
		log.Fatal(err)
	}
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"order.confirm"}})
	if err != nil {
		log.Fatal(err)
	}

	placeOrder := func(item string, commit bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item)
		if err != nil {
			log.Fatal(err)
		}
		id, _ := res.LastInsertId()
		if _, err := c.EnqueueTx(ctx, tx, "order.confirm", map[string]int64{"order_id": id}); err != nil {
			log.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				log.Fatal(err)
			}
		}
	}
	placeOrder("book", true)
	placeOrder("lamp", false) // rolled back: neither the order nor its task exists

	tasks, err := c.List(ctx, keel.Filter{Type: "order.confirm"})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tasks {
		fmt.Println(t.Type, string(t.Payload))
	}
	// Output:
	// order.confirm {"order_id":1}
}

// CompleteTx commits the handler's own writes and the task's completion in
// one transaction: a retry can never apply the effect twice.
func ExampleCompleteTx() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()
	db := drv.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE balances (account TEXT PRIMARY KEY, cents INTEGER)`); err != nil {
		log.Fatal(err)
	}

	type Credit struct {
		Account string `json:"account"`
		Cents   int64  `json:"cents"`
	}
	h := keel.NewHandlers()
	keel.Handle(h, "account.credit", func(ctx context.Context, t *keel.Task[Credit]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO balances VALUES (?, ?)
			ON CONFLICT (account) DO UPDATE SET cents = cents + excluded.cents`, t.Args.Account, t.Args.Cents); err != nil {
			return err
		}
		if err := keel.CompleteTx(ctx, tx, map[string]int64{"credited": t.Args.Cents}); err != nil {
			return err // ErrLeaseLost: another worker owns the task now; roll back
		}
		return tx.Commit()
	})
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	info, err := c.Enqueue(ctx, "account.credit", Credit{Account: "acme", Cents: 1250})
	if err != nil {
		log.Fatal(err)
	}
	t := exampleWait(c, info.ID)
	var cents int64
	if err := db.QueryRowContext(ctx, `SELECT cents FROM balances WHERE account = 'acme'`).Scan(&cents); err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.State, string(t.Result), "balance:", cents)

	// Outside a handler there is no task to complete.
	var notInHandler *sql.Tx
	fmt.Println(errors.Is(keel.CompleteTx(ctx, notInHandler, nil), keel.ErrNotInHandler))
	// Output:
	// succeeded {"credited":1250} balance: 1250
	// true
}

// UniqueBy dedupes by content: submitting the same payload again returns
// the task that holds the key; a different payload is new work.
func ExampleUniqueBy() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"invoice.send"}})
	if err != nil {
		log.Fatal(err)
	}

	for _, payload := range []map[string]any{
		{"invoice": 42, "to": "ada@example.com"},
		{"to": "ada@example.com", "invoice": 42}, // same content, other key order
		{"invoice": 42, "to": "grace@example.com"},
	} {
		info, err := c.Enqueue(ctx, "invoice.send", payload, keel.UniqueBy("invoice-42"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("task %d duplicate=%v\n", info.ID, info.Duplicate)
	}
	// Output:
	// task 1 duplicate=false
	// task 1 duplicate=true
	// task 2 duplicate=false
}

// IdempotencyKey dedupes by the caller's own key, such as an HTTP
// Idempotency-Key header; reusing it for another payload is a conflict.
func ExampleIdempotencyKey() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"payment.capture"}})
	if err != nil {
		log.Fatal(err)
	}

	key := keel.IdempotencyKey("req-7f3a")
	first, _ := c.Enqueue(ctx, "payment.capture", map[string]int{"cents": 500}, key)
	replay, _ := c.Enqueue(ctx, "payment.capture", map[string]int{"cents": 500}, key)
	_, err = c.Enqueue(ctx, "payment.capture", map[string]int{"cents": 900}, key)

	fmt.Println(first.ID, replay.ID, replay.Duplicate)
	fmt.Println(errors.Is(err, keel.ErrIdempotencyConflict))
	// Output:
	// 1 1 true
	// true
}

// Retry requeues a dead letter: it runs again with its attempts reset and
// its error history kept.
func ExampleClient_Retry() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	fixed := make(chan struct{})
	h := keel.NewHandlers()
	keel.Handle(h, "webhook.deliver", func(ctx context.Context, t *keel.Task[string]) error {
		select {
		case <-fixed:
			return nil
		default:
			return keel.Permanent(errors.New("410 gone"))
		}
	})
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	info, err := c.Enqueue(ctx, "webhook.deliver", "https://example.com/hook")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(exampleWait(c, info.ID).State)

	close(fixed) // the receiver is back
	if _, err := c.Retry(ctx, info.ID); err != nil {
		log.Fatal(err)
	}
	t := exampleWait(c, info.ID)
	fmt.Println(t.State, "attempt", t.Attempt, "with", len(t.Errors), "earlier error kept")
	// Output:
	// dead
	// succeeded attempt 1 with 1 earlier error kept
}

// A handler that returns Snooze runs again later without using an attempt.
func ExampleSnooze() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	var runs atomic.Int32
	h := keel.NewHandlers()
	keel.Handle(h, "export.poll", func(ctx context.Context, t *keel.Task[struct{}]) error {
		if runs.Add(1) < 3 {
			return keel.Snooze(20 * time.Millisecond) // not ready yet
		}
		return nil
	}, keel.MaxAttempts(1))
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	info, err := c.Enqueue(ctx, "export.poll", struct{}{})
	if err != nil {
		log.Fatal(err)
	}
	t := exampleWait(c, info.ID)
	fmt.Println(t.State, "after", runs.Load(), "runs, attempt", t.Attempt, "of", t.MaxAttempts)
	// Output:
	// succeeded after 3 runs, attempt 1 of 1
}

// A web process enqueues "report.build" tasks that worker processes run:
// Declare gives its client the type's defaults without a handler.
func ExampleDeclare() {
	drv, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()

	h := keel.NewHandlers()
	keel.Declare(h, "report.build", keel.Queue("reports"), keel.Priority(3), keel.MaxAttempts(2))
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.Enqueue(ctx, "report.build", map[string]string{"month": "2026-11"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Queue, info.Priority, info.MaxAttempts, info.State)
	// Output: reports 3 2 pending
}

// Operators pause a queue, cap a type's concurrency and requeue dead
// letters at runtime; every node applies settings within
// Config.SettingsInterval.
func ExampleClient_UpdateQueue() {
	drv, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()

	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"email.send"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	paused := true
	q, err := c.UpdateQueue(ctx, "default", keel.QueueUpdate{Paused: &paused})
	if err != nil {
		log.Fatal(err)
	}
	two := 2
	ty, err := c.UpdateType(ctx, "email.send", keel.TypeUpdate{Concurrency: &two})
	if err != nil {
		log.Fatal(err)
	}
	n, err := c.RetryMatching(ctx, keel.Filter{Type: "email.send"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Name, "paused:", q.Paused)
	fmt.Println(ty.Name, "concurrency:", ty.Concurrency)
	fmt.Println("requeued:", n)
	// Output:
	// default paused: true
	// email.send concurrency: 2
	// requeued: 0
}

// A schedule enqueues a task on every tick of its cron spec; the elected
// leader enqueues each tick once, whichever process leads.
func ExampleSchedule() {
	drv, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()

	ran := make(chan string, 10)
	h := keel.NewHandlers()
	keel.Handle(h, "cache.refresh", func(ctx context.Context, t *keel.Task[map[string]string]) error {
		ran <- t.Args["region"]
		return nil
	})
	cfg := exampleConfig(drv, h)
	cfg.Schedules = []keel.Schedule{
		{Name: "refresh", Spec: "@every 1s", Type: "cache.refresh", Payload: map[string]string{"region": "eu"}},
		{Name: "nightly", Spec: "0 3 * * *", TimeZone: "Asia/Tokyo", Type: "cache.refresh", Missed: keel.MissedSkip},
	}
	c, err := keel.NewClient(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil { // stores the schedules, runs the leader's loop
		log.Fatal(err)
	}
	defer c.Stop(ctx)
	select {
	case region := <-ran:
		fmt.Println("a tick ran for", region)
	case <-time.After(30 * time.Second):
		log.Fatal("no tick ran")
	}
	list, err := c.Schedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range list {
		fmt.Println(s.Name, s.Spec, s.NextRun.Location(), s.Missed)
	}
	// Output:
	// a tick ran for eu
	// nightly 0 3 * * * Asia/Tokyo skip
	// refresh @every 1s UTC run_once
}

// A handler cut into durable steps: the retry after a failure in the
// second step does not run the first again, it gets its stored result.
func ExampleStep() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	var fetches, sends atomic.Int32
	h := keel.NewHandlers()
	keel.Handle(h, "report.send", func(ctx context.Context, t *keel.Task[string]) error {
		rows, err := keel.Step(ctx, "fetch", func(ctx context.Context) ([]int, error) {
			fetches.Add(1)
			return []int{3, 1, 4}, nil // an expensive query
		})
		if err != nil {
			return err
		}
		_, err = keel.Step(ctx, "send", func(ctx context.Context) (string, error) {
			if sends.Add(1) == 1 {
				return "", errors.New("mail server busy") // retried with backoff
			}
			return fmt.Sprintf("sent %d rows to %s", len(rows), t.Args), nil
		})
		return err
	})
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	info, err := c.Enqueue(ctx, "report.send", "ada@example.com")
	if err != nil {
		log.Fatal(err)
	}
	t := exampleWait(c, info.ID)
	fmt.Println(t.State, "after", t.Attempt, "attempts; fetch ran", fetches.Load(), "time, send", sends.Load(), "times")
	for _, s := range t.Steps {
		fmt.Printf("step %s (attempt %d): %s\n", s.Name, s.Attempt, s.Result)
	}
	// Output:
	// succeeded after 2 attempts; fetch ran 1 time, send 2 times
	// step fetch (attempt 1): [3,1,4]
	// step send (attempt 2): "sent 3 rows to ada@example.com"
}

// A type's concurrency and rate hold across the cluster; a ramp raises the
// concurrency step by step while failures stay low.
func ExampleClient_StartRamp() {
	drv, cleanup := exampleDB()
	defer cleanup()
	ctx := context.Background()

	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"email.send"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	// At most 50 starts per second on all nodes together, bursts of 5.
	ty, err := c.UpdateType(ctx, "email.send", keel.TypeUpdate{Rate: new(50.0), Burst: new(5)})
	if err != nil {
		log.Fatal(err)
	}
	// Concurrency 1 now, then 2, 5 and 10, ten minutes apart, while at most
	// 20 % of the attempts since the last step failed.
	st, err := c.StartRamp(ctx, "email.send", keel.Ramp{Steps: []int{1, 2, 5, 10}, Every: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ty.Name, "rate:", ty.Rate, "burst:", ty.Burst)
	fmt.Println("ramp at step", st.Step+1, "of", len(st.Steps), "concurrency", st.Concurrency(), "next in", st.NextAt.Sub(st.StepAt))
	// Output:
	// email.send rate: 50 burst: 5
	// ramp at step 1 of 4 concurrency 1 next in 10m0s
}

// A type with OnDead gets one follow-up task per dead task, inserted with
// the dead-lettering: here it records the failure for a person.
func ExampleOnDead() {
	drv, done := exampleDB()
	defer done()
	ctx := context.Background()

	followed := make(chan keel.DeadTask, 1)
	h := keel.NewHandlers()
	keel.Handle(h, "invoice.send", func(ctx context.Context, t *keel.Task[struct{ To string }]) error {
		return keel.Permanent(errors.New("no such recipient"))
	}, keel.OnDead("invoice.failed"))
	keel.Handle(h, "invoice.failed", func(ctx context.Context, t *keel.Task[keel.DeadTask]) error {
		followed <- t.Args // a failure table, a ticket, a message to a person
		return nil
	})
	c, err := keel.NewClient(exampleConfig(drv, h))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	if _, err := c.Enqueue(ctx, "invoice.send", struct{ To string }{"nobody@example.com"}); err != nil {
		log.Fatal(err)
	}
	d := <-followed
	fmt.Println(d.Type, "died after attempt", d.Attempt, "with", d.Error, "; payload", string(d.Payload))
	// Output:
	// invoice.send died after attempt 1 with permanent: no such recipient ; payload {"To":"nobody@example.com"}
}
