package keel_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel"
)

// TestEnqueueBadInput: every rejected enqueue names the problem through
// ErrInvalid, ErrUnknownType or ErrPayloadTooLarge and writes nothing.
func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	cases := []struct {
		name    string
		typ     string
		payload any
		opts    []keel.Option
		want    error
	}{
		{"payload bytes not JSON", "t.known", []byte("{not json"), nil, keel.ErrInvalid},
		{"payload raw message truncated", "t.known", json.RawMessage(`{"n":`), nil, keel.ErrInvalid},
		{"payload empty bytes", "t.known", []byte{}, nil, keel.ErrInvalid},
		{"payload two values", "t.known", []byte(`{} {}`), nil, keel.ErrInvalid},
		{"payload nested too deep", "t.known", []byte(deep), nil, keel.ErrInvalid},
		{"payload not encodable (chan)", "t.known", map[string]any{"c": make(chan int)}, nil, keel.ErrInvalid},
		{"payload not encodable (NaN)", "t.known", math.NaN(), nil, keel.ErrInvalid},
		{"payload over 1 MiB", "t.known", payload{S: strings.Repeat("x", 1<<20)}, nil, keel.ErrPayloadTooLarge},
		{"payload bytes over 1 MiB", "t.known", []byte(`"` + strings.Repeat("x", 1<<20) + `"`), nil, keel.ErrPayloadTooLarge},
		{"unknown type", "t.unknown", payload{}, nil, keel.ErrUnknownType},
		{"empty type", "", payload{}, nil, keel.ErrInvalid},
		{"type with space", "t known", payload{}, nil, keel.ErrInvalid},
		{"type too long", strings.Repeat("t", 129), payload{}, nil, keel.ErrInvalid},
		{"MaxAttempts(0)", "t.known", payload{}, []keel.Option{keel.MaxAttempts(0)}, keel.ErrInvalid},
		{"MaxAttempts(-1)", "t.known", payload{}, []keel.Option{keel.MaxAttempts(-1)}, keel.ErrInvalid},
		{"MaxAttempts(1001)", "t.known", payload{}, []keel.Option{keel.MaxAttempts(1001)}, keel.ErrInvalid},
		{"MaxSnoozes on Enqueue (a per-type option)", "t.known", payload{}, []keel.Option{keel.MaxSnoozes(5)}, keel.ErrInvalid},
		{"Timeout(-1s)", "t.known", payload{}, []keel.Option{keel.Timeout(-time.Second)}, keel.ErrInvalid},
		{"Timeout(0)", "t.known", payload{}, []keel.Option{keel.Timeout(0)}, keel.ErrInvalid},
		{"Timeout(1µs)", "t.known", payload{}, []keel.Option{keel.Timeout(time.Microsecond)}, keel.ErrInvalid},
		{"Delay(-1s)", "t.known", payload{}, []keel.Option{keel.Delay(-time.Second)}, keel.ErrInvalid},
		{"RunAt and Delay", "t.known", payload{}, []keel.Option{keel.RunAt(time.Now()), keel.Delay(time.Second)}, keel.ErrInvalid},
		{"empty queue", "t.known", payload{}, []keel.Option{keel.Queue("")}, keel.ErrInvalid},
		{"queue with space", "t.known", payload{}, []keel.Option{keel.Queue("my queue")}, keel.ErrInvalid},
		{"queue starting with dash", "t.known", payload{}, []keel.Option{keel.Queue("-q")}, keel.ErrInvalid},
		{"queue with slash", "t.known", payload{}, []keel.Option{keel.Queue("a/b")}, keel.ErrInvalid},
		{"priority too high", "t.known", payload{}, []keel.Option{keel.Priority(1_000_001)}, keel.ErrInvalid},
		{"empty IdempotencyKey", "t.known", payload{}, []keel.Option{keel.IdempotencyKey("")}, keel.ErrInvalid},
		{"IdempotencyKey too long", "t.known", payload{}, []keel.Option{keel.IdempotencyKey(strings.Repeat("k", 256))}, keel.ErrInvalid},
		{"empty UniqueBy", "t.known", payload{}, []keel.Option{keel.UniqueBy("")}, keel.ErrInvalid},
		{"UniqueBy and IdempotencyKey", "t.known", payload{}, []keel.Option{keel.UniqueBy("a"), keel.IdempotencyKey("b")}, keel.ErrInvalid},
		{"Backoff on a single task", "t.known", payload{}, []keel.Option{keel.Backoff(time.Second, time.Minute)}, keel.ErrInvalid},
		{"OnDead on a single task", "t.known", payload{}, []keel.Option{keel.OnDead("t.failed")}, keel.ErrInvalid},
		{"meta empty key", "t.known", payload{}, []keel.Option{keel.Meta(map[string]string{"": "v"})}, keel.ErrInvalid},
		// What one database refuses or another stores changed is refused
		// before any database sees it (issue 11, defects 6 and 8).
		{"payload with NUL", "t.known", payload{S: "a\x00b"}, nil, keel.ErrInvalid},
		{"payload bytes with NUL", "t.known", []byte(`{"s":"a\u0000b"}`), nil, keel.ErrInvalid},
		{"payload key with NUL", "t.known", map[string]int{"a\x00": 1}, nil, keel.ErrInvalid},
		{"payload lone surrogate", "t.known", []byte(`{"s":"\ud800"}`), nil, keel.ErrInvalid},
		{"payload invalid UTF-8 bytes", "t.known", []byte("{\"s\":\"caf\xe9\"}"), nil, keel.ErrInvalid},
		{"payload duplicate key", "t.known", []byte(`{"n":1,"n":2}`), nil, keel.ErrInvalid},
		{"payload nested duplicate key", "t.known", json.RawMessage(`{"a":[{"n":1,"s":"x","n":2}]}`), nil, keel.ErrInvalid},
		{"payload huge number", "t.known", []byte(`{"n":1e400000}`), nil, keel.ErrInvalid},
		{"payload tiny number", "t.known", []byte(`{"n":1e-400000}`), nil, keel.ErrInvalid},
		{"IdempotencyKey with NUL", "t.known", payload{}, []keel.Option{keel.IdempotencyKey("k\x00")}, keel.ErrInvalid},
		{"IdempotencyKey invalid UTF-8", "t.known", payload{}, []keel.Option{keel.IdempotencyKey("k\xff")}, keel.ErrInvalid},
		{"meta value with NUL", "t.known", payload{}, []keel.Option{keel.Meta(map[string]string{"k": "v\x00"})}, keel.ErrInvalid},
		{"meta key with NUL", "t.known", payload{}, []keel.Option{keel.Meta(map[string]string{"k\x00": "v"})}, keel.ErrInvalid},
		{"meta value invalid UTF-8", "t.known", payload{}, []keel.Option{keel.Meta(map[string]string{"k": "\xc3"})}, keel.ErrInvalid},
		{"meta key invalid UTF-8", "t.known", payload{}, []keel.Option{keel.Meta(map[string]string{"\xc3": "v"})}, keel.ErrInvalid},
		// A huge name is named, not echoed whole (defect 9).
		{"type of 1 MB", strings.Repeat("t", 1<<20), payload{}, nil, keel.ErrInvalid},
		{"queue of 1 MB", "t.known", payload{}, []keel.Option{keel.Queue(strings.Repeat("q", 1<<20))}, keel.ErrInvalid},
	}
	for _, tc := range cases {
		info, err := c.Enqueue(ctx, tc.typ, tc.payload, tc.opts...)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v (task %+v), want %v", tc.name, err, info, tc.want)
			continue
		}
		if info != nil {
			t.Errorf("%s: error %v but a task was returned", tc.name, err)
		}
		if err.Error() == tc.want.Error() {
			t.Errorf("%s: error %q does not say what was wrong", tc.name, err)
		}
		if len(err.Error()) > 512 {
			t.Errorf("%s: error of %d bytes echoes the input: %.80s…", tc.name, len(err.Error()), err)
		}
		// The same job inside a batch of good ones fails the whole batch.
		_, err = c.EnqueueMany(ctx, []keel.TaskSpec{
			{Type: "t.known", Payload: payload{N: 1}},
			{Type: tc.typ, Payload: tc.payload, Options: tc.opts},
			{Type: "t.known", Payload: payload{N: 2}},
		})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s in EnqueueMany: got %v, want %v", tc.name, err, tc.want)
		}
	}
	requireEmpty(t, c)

	if _, err := c.EnqueueMany(ctx, nil); !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("EnqueueMany with no jobs: %v", err)
	}
	if _, err := c.EnqueueTx(ctx, nil, "t.known", payload{}); !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("EnqueueTx with a nil tx: %v", err)
	}
	requireEmpty(t, c)
}

// TestEnqueueRollsBackWholeBatchOnConflict: a batch whose idempotency key
// conflicts in the database writes none of its tasks.
func TestEnqueueRollsBackWholeBatchOnConflict(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	first, err := c.Enqueue(ctx, "t.known", payload{N: 1}, keel.IdempotencyKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.EnqueueMany(ctx, []keel.TaskSpec{
		{Type: "t.known", Payload: payload{N: 5}},
		{Type: "t.known", Payload: payload{N: 2}, Options: []keel.Option{keel.IdempotencyKey("k")}},
	})
	if !errors.Is(err, keel.ErrIdempotencyConflict) {
		t.Fatalf("got %v, want ErrIdempotencyConflict", err)
	}
	list, err := c.List(ctx, keel.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != first.ID {
		t.Fatalf("%d tasks after a failed batch, want only the first", len(list))
	}
}

// TestPayloadLimitBoundary: a payload of exactly MaxPayloadBytes is
// accepted, one byte more is not.
func TestPayloadLimitBoundary(t *testing.T) {
	t.Parallel()
	c, _ := setup(t, func(cfg *keel.Config) { cfg.MaxPayloadBytes = 16 })
	ctx := context.Background()
	exact := []byte(`"` + strings.Repeat("x", 14) + `"`)
	if _, err := c.Enqueue(ctx, "t.known", exact); err != nil {
		t.Fatalf("payload of exactly the limit: %v", err)
	}
	over := []byte(`"` + strings.Repeat("x", 15) + `"`)
	if _, err := c.Enqueue(ctx, "t.known", over); !errors.Is(err, keel.ErrPayloadTooLarge) {
		t.Fatalf("payload one byte over: %v", err)
	}
	list, _ := c.List(ctx, keel.Filter{})
	if len(list) != 1 {
		t.Fatalf("%d tasks, want 1", len(list))
	}
}

// TestNilPayloadIsEmptyObject: a task enqueued without a payload carries
// {}, so a handler decodes it and an HTTP target receives an object.
func TestNilPayloadIsEmptyObject(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	info, err := c.Enqueue(context.Background(), "t.known", nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(info.Payload) != "{}" {
		t.Fatalf("nil payload stored as %s, want {}", info.Payload)
	}
	got, err := c.Get(context.Background(), info.ID)
	if err != nil || string(got.Payload) != "{}" {
		t.Fatalf("nil payload read back as %s, %v; want {}", got.Payload, err)
	}
}

// Times outside the years 1000 to 9999 that run_at refuses.
var (
	year0     = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	year10000 = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

func TestListBadInput(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []keel.Filter{
		{State: "done"}, {Limit: -1}, {Limit: 1001},
		{CreatedAfter: t0, CreatedBefore: t0}, {CreatedAfter: t0.Add(time.Hour), CreatedBefore: t0},
		{FinishedAfter: t0, FinishedBefore: t0}, {FinishedAfter: t0.Add(time.Hour), FinishedBefore: t0},
		{Type: "\x00"}, {Queue: "a\x00"}, {Type: "\xff"}, {Queue: "q\xc3"},
		// Outside run_at's range.
		{CreatedAfter: year0}, {CreatedBefore: year10000}, {FinishedAfter: year0}, {FinishedBefore: year10000},
	} {
		if _, err := c.List(ctx, p); !errors.Is(err, keel.ErrInvalid) {
			t.Fatalf("List(%+v): %v, want ErrInvalid", p, err)
		}
	}
	if _, err := c.Alerts(ctx, keel.AlertFilter{Since: year0}); !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("Alerts since year 0: %v, want ErrInvalid", err)
	}
}

// The bulk operations take the same Filter as List but only what they can
// apply: a List-only bound is refused, not ignored, and nothing changes.
func TestBulkFilterBadInput(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range []keel.Filter{
		{State: keel.StatePending}, {Limit: 10001}, {CreatedAfter: t0}, {CreatedBefore: t0}, {BeforeID: 5},
		{FinishedAfter: t0, FinishedBefore: t0}, {Type: "no spaces"},
		{FinishedAfter: year0}, {FinishedBefore: year10000},
	} {
		if _, err := c.RetryMatching(ctx, f); !errors.Is(err, keel.ErrInvalid) {
			t.Fatalf("RetryMatching(%+v): %v, want ErrInvalid", f, err)
		}
		if _, err := c.PurgeMatching(ctx, f); !errors.Is(err, keel.ErrInvalid) {
			t.Fatalf("PurgeMatching(%+v): %v, want ErrInvalid", f, err)
		}
	}
}

// TestNewClientRejectsBadConfig: every invalid field is named through
// ErrInvalid.
func TestNewClientRejectsBadConfig(t *testing.T) {
	t.Parallel()
	_, drv := setup(t)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // never called: the config is refused first
	defer rdb.Close()
	cases := map[string]func(*keel.Config){
		"no driver":                     func(c *keel.Config) { c.Driver = nil },
		"negative Timeout":              func(c *keel.Config) { c.Timeout = -time.Second },
		"negative BackoffBase":          func(c *keel.Config) { c.BackoffBase = -time.Second },
		"negative BackoffMax":           func(c *keel.Config) { c.BackoffMax = -time.Second },
		"negative LeaseTTL":             func(c *keel.Config) { c.LeaseTTL = -time.Second },
		"negative HeartbeatInterval":    func(c *keel.Config) { c.HeartbeatInterval = -time.Second },
		"heartbeat equal to lease":      func(c *keel.Config) { c.LeaseTTL, c.HeartbeatInterval = time.Second, time.Second },
		"heartbeat above lease":         func(c *keel.Config) { c.LeaseTTL, c.HeartbeatInterval = time.Second, 2*time.Second },
		"lease below default heartbeat": func(c *keel.Config) { c.LeaseTTL = 5 * time.Second },
		"negative PollInterval":         func(c *keel.Config) { c.PollInterval = -time.Second },
		"negative RescueInterval":       func(c *keel.Config) { c.RescueInterval = -time.Second },
		"negative ReconcileInterval":    func(c *keel.Config) { c.ReconcileInterval = -time.Second },
		"negative MaintainInterval":     func(c *keel.Config) { c.MaintainInterval = -time.Second },
		"negative HistoryRetention":     func(c *keel.Config) { c.HistoryRetention = -time.Hour },
		"HistoryRetention below 1h":     func(c *keel.Config) { c.HistoryRetention = 59 * time.Minute },
		"negative TimeoutGrace":         func(c *keel.Config) { c.TimeoutGrace = -time.Second },
		"negative MaxAttempts":          func(c *keel.Config) { c.MaxAttempts = -1 },
		"MaxAttempts over 1000":         func(c *keel.Config) { c.MaxAttempts = 1001 },
		"Timeout below 1ms":             func(c *keel.Config) { c.Timeout = 500 * time.Microsecond },
		"jitter 1":                      func(c *keel.Config) { c.BackoffJitter = 1 },
		"backoff max below base":        func(c *keel.Config) { c.BackoffBase, c.BackoffMax = time.Minute, time.Second },
		"jitter 1.5":                    func(c *keel.Config) { c.BackoffJitter = 1.5 },
		"negative ClaimBatch":           func(c *keel.Config) { c.ClaimBatch = -1 },
		"ClaimBatch over 1000":          func(c *keel.Config) { c.ClaimBatch = 1001 },
		"negative MaxPayloadBytes":      func(c *keel.Config) { c.MaxPayloadBytes = -1 },
		"negative SettingsInterval":     func(c *keel.Config) { c.SettingsInterval = -time.Second },
		"negative MaxRunawayHandlers":   func(c *keel.Config) { c.MaxRunawayHandlers = -1 },
		"negative MaxSnoozes":           func(c *keel.Config) { c.MaxSnoozes = -1 },
		"MaxSnoozes over the limit":     func(c *keel.Config) { c.MaxSnoozes = 1_000_001 },
		"bad queue name":                func(c *keel.Config) { c.Queues = map[string]keel.QueueConfig{"bad queue": {}} },
		"empty queue name":              func(c *keel.Config) { c.Queues = map[string]keel.QueueConfig{"": {}} },
		"negative MaxWorkers":           func(c *keel.Config) { c.Queues = map[string]keel.QueueConfig{"q": {MaxWorkers: -1}} },
		"Prefetch below NoPrefetch":     func(c *keel.Config) { c.Queues = map[string]keel.QueueConfig{"q": {Prefetch: -2}} },
		"Prefetch over 4×MaxWorkers": func(c *keel.Config) {
			c.Queues = map[string]keel.QueueConfig{"q": {MaxWorkers: 2, Prefetch: 9}}
		},
		"Prefetch over 1000": func(c *keel.Config) {
			c.Queues = map[string]keel.QueueConfig{"q": {MaxWorkers: 1000, Prefetch: 1001}}
		},
		"bad type name":                func(c *keel.Config) { c.Types = []string{"ok", "not ok"} },
		"RetainSucceeded below 1m":     func(c *keel.Config) { c.RetainSucceeded = 59 * time.Second },
		"negative RetainSucceeded":     func(c *keel.Config) { c.RetainSucceeded = -time.Hour },
		"RetainDead below 7 days":      func(c *keel.Config) { c.RetainDead = 7*24*time.Hour - time.Second },
		"negative DeleteArchivedAfter": func(c *keel.Config) { c.DeleteArchivedAfter = -time.Hour },
		"negative ArchiveInterval":     func(c *keel.Config) { c.ArchiveInterval = -time.Second },
		"negative ArchiveBatch":        func(c *keel.Config) { c.ArchiveBatch = -1 },
		"ArchiveBatch over 10000":      func(c *keel.Config) { c.ArchiveBatch = 10001 },
		"RedisGate without Client":     func(c *keel.Config) { c.RedisGate = &keel.RedisGate{} },
		"RedisGate negative TTL": func(c *keel.Config) {
			c.RedisGate = &keel.RedisGate{Client: rdb, TTL: -time.Second}
		},
		"RedisGate TTL below 1ms": func(c *keel.Config) {
			c.RedisGate = &keel.RedisGate{Client: rdb, TTL: time.Microsecond}
		},
		"RedisGate negative Wait": func(c *keel.Config) {
			c.RedisGate = &keel.RedisGate{Client: rdb, Wait: -time.Second}
		},
	}
	for name, mod := range cases {
		cfg := keel.Config{Driver: drv}
		mod(&cfg)
		c, err := keel.NewClient(cfg)
		if !errors.Is(err, keel.ErrInvalid) || c != nil {
			t.Errorf("%s: NewClient returned %v, %v; want ErrInvalid", name, c, err)
		}
	}
	if _, err := keel.NewClient(keel.Config{Driver: drv, BackoffJitter: -1}); err != nil {
		t.Fatalf("negative jitter (off) must be valid: %v", err)
	}
	if _, err := keel.NewClient(keel.Config{Driver: drv, RetainSucceeded: time.Minute, RetainDead: 7 * 24 * time.Hour}); err != nil {
		t.Fatalf("the least retention must be valid: %v", err)
	}
	_, err := keel.NewClient(keel.Config{Driver: drv, RetainDead: 24 * time.Hour})
	if err == nil || !strings.Contains(err.Error(), "RetainDead must be at least 168h") {
		t.Fatalf("RetainDead of a day: %v, want an error naming RetainDead and its least value", err)
	}
}

func TestStartNeedsHandlersOnce(t *testing.T) {
	t.Parallel()
	c, drv := setup(t)
	if err := c.Start(context.Background()); !errors.Is(err, keel.ErrNotWorker) {
		t.Fatalf("Start without handlers: %v, want ErrNotWorker", err)
	}
	h := keel.NewHandlers()
	keel.Handle(h, "t.known", func(ctx context.Context, task *keel.Task[payload]) error { return nil })
	w, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	if err := w.Start(context.Background()); !errors.Is(err, keel.ErrNotWorker) {
		t.Fatalf("second Start: %v, want ErrNotWorker", err)
	}
}

func TestCompleteTxOutsideHandler(t *testing.T) {
	t.Parallel()
	_, drv := setup(t)
	tx, err := drv.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := keel.CompleteTx(context.Background(), tx, nil); !errors.Is(err, keel.ErrNotInHandler) {
		t.Fatalf("CompleteTx outside a handler: %v, want ErrNotInHandler", err)
	}
}

// TestHandlePanicsOnProgrammingErrors: registration mistakes panic at
// startup, like http.HandleFunc.
func TestHandlePanicsOnProgrammingErrors(t *testing.T) {
	t.Parallel()
	fn := func(ctx context.Context, task *keel.Task[payload]) error { return nil }
	cases := map[string]func(h *keel.Handlers){
		"invalid name":   func(h *keel.Handlers) { keel.Handle(h, "bad name", fn) },
		"empty name":     func(h *keel.Handlers) { keel.Handle(h, "", fn) },
		"duplicate":      func(h *keel.Handlers) { keel.Handle(h, "t", fn); keel.Handle(h, "t", fn) },
		"nil handler":    func(h *keel.Handlers) { keel.Handle[payload](h, "t", nil) },
		"per-task opt":   func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.IdempotencyKey("k")) },
		"bad default":    func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.MaxAttempts(0)) },
		"bad backoff":    func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.Backoff(time.Minute, time.Second)) },
		"bad snoozes":    func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.MaxSnoozes(0)) },
		"delay on type":  func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.Delay(time.Second)) },
		"bad type queue": func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.Queue("a b")) },
		"declare name":   func(h *keel.Handlers) { keel.Declare(h, "bad name") },
		"declare twice":  func(h *keel.Handlers) { keel.Declare(h, "t"); keel.Handle(h, "t", fn) },
		"declare opt":    func(h *keel.Handlers) { keel.Declare(h, "t", keel.UniqueBy("x")) },
		"declare bad":    func(h *keel.Handlers) { keel.Declare(h, "t", keel.Priority(-1), keel.MaxAttempts(-3)) },
		"on_dead itself": func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.OnDead("t")) },
		"on_dead name":   func(h *keel.Handlers) { keel.Handle(h, "t", fn, keel.OnDead("a b")) },
		"on_dead keel.":  func(h *keel.Handlers) { keel.Declare(h, "t", keel.OnDead("keel.x")) },
		"on_dead empty":  func(h *keel.Handlers) { keel.Declare(h, "t", keel.OnDead("")) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Handle did not panic", name)
				}
			}()
			f(keel.NewHandlers())
		}()
	}
}

// TestAnyType: a server-style client accepts any valid type name; others
// only the types they know. Invalid names are rejected either way.
func TestAnyType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	strict, _ := setup(t)
	if _, err := strict.Enqueue(ctx, "t.unknown", payload{}); !errors.Is(err, keel.ErrUnknownType) {
		t.Fatalf("strict client, unknown type: %v", err)
	}
	requireEmpty(t, strict)
	open, _ := setup(t, func(c *keel.Config) { c.AnyType = true })
	info, err := open.Enqueue(ctx, "t.unknown", payload{N: 1})
	if err != nil || info.Type != "t.unknown" || info.State != keel.StatePending {
		t.Fatalf("AnyType client: %+v, %v", info, err)
	}
	if _, err := open.Enqueue(ctx, "bad name", payload{}); !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("AnyType client, invalid name: %v", err)
	}
}

// TestDeclare: a declared type is enqueued with its defaults by a client
// that has no handler for it, and such a client cannot Start.
func TestDeclare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := keel.NewHandlers()
	keel.Declare(h, "t.declared", keel.Queue("mail"), keel.Priority(5), keel.MaxAttempts(7), keel.Timeout(time.Minute))
	c, _ := setup(t, func(cfg *keel.Config) { cfg.Handlers = h })
	info, err := c.Enqueue(ctx, "t.declared", payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if info.Queue != "mail" || info.Priority != 5 || info.MaxAttempts != 7 || info.Timeout != time.Minute {
		t.Fatalf("declared defaults not applied: %+v", info)
	}
	over, err := c.Enqueue(ctx, "t.declared", payload{N: 2}, keel.Priority(1))
	if err != nil || over.Priority != 1 || over.Queue != "mail" {
		t.Fatalf("an option overrides a declared default: %+v, %v", over, err)
	}
	if err := c.Start(ctx); !errors.Is(err, keel.ErrNotWorker) {
		t.Fatalf("Start with only declared types: %v, want ErrNotWorker", err)
	}

	// A worker that serves the declared type's queue never claims its
	// tasks (it cannot run them): they stay pending, unattempted, while
	// another type on the same queue runs.
	wh := keel.NewHandlers()
	ran := make(chan int64, 1)
	keel.Handle(wh, "t.known", func(ctx context.Context, task *keel.Task[payload]) error {
		ran <- task.ID
		return nil
	}, keel.Queue("mail"))
	keel.Declare(wh, "t.declared", keel.Queue("mail"))
	w, drv := setup(t, func(cfg *keel.Config) {
		cfg.Handlers, cfg.PollInterval, cfg.Queues = wh, 10*time.Millisecond, map[string]keel.QueueConfig{"mail": {}}
	})
	decl, err := w.Enqueue(ctx, "t.declared", payload{N: 3}, keel.Priority(10)) // first in line
	if err != nil {
		t.Fatal(err)
	}
	known, err := w.Enqueue(ctx, "t.known", payload{N: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	select {
	case id := <-ran:
		if id != known.ID {
			t.Fatalf("ran task %d, want %d", id, known.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handled type's task did not run")
	}
	time.Sleep(100 * time.Millisecond) // several polls
	row, err := drv.Get(ctx, decl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != keel.StatePending || row.Attempt != 0 || len(row.Errors) != 0 {
		t.Fatalf("declared task claimed by a worker without its handler: %s, attempt %d, errors %+v", row.State, row.Attempt, row.Errors)
	}
}
