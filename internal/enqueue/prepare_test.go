package enqueue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/scheduler"
)

var now = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// The option functions as package keel defines them.
func queue(q string) func(*Options)        { return func(o *Options) { o.Queue = Ptr(q) } }
func priority(p int) func(*Options)        { return func(o *Options) { o.Priority = Ptr(p) } }
func runAt(t time.Time) func(*Options)     { return func(o *Options) { o.RunAt = Ptr(t) } }
func delay(d time.Duration) func(*Options) { return func(o *Options) { o.Delay = Ptr(d) } }
func maxAttempts(n int) func(*Options)     { return func(o *Options) { o.MaxAttempts = Ptr(n) } }
func timeout(d time.Duration) func(*Options) {
	return func(o *Options) { o.Timeout = Ptr(d) }
}
func uniqueBy(k string) func(*Options)          { return func(o *Options) { o.UniqueBy = Ptr(k) } }
func idemKey(k string) func(*Options)           { return func(o *Options) { o.IdemKey = Ptr(k) } }
func meta(m map[string]string) func(*Options)   { return func(o *Options) { o.Meta = m } }
func onDead(t string) func(*Options)            { return func(o *Options) { o.OnDead = Ptr(t) } }
func maxSnoozes(n int) func(*Options)           { return func(o *Options) { o.MaxSnoozes = Ptr(n) } }
func brake(b driver.BrakeConfig) func(*Options) { return func(o *Options) { o.Brake = &b } }
func backoffOpt(base, max time.Duration) func(*Options) {
	return func(o *Options) { o.Backoff = &backoff.Policy{Base: base, Max: max} }
}

func opts(fs ...func(*Options)) []func(*Options) { return fs }

// preparer knows "email" with defaults, "plain" without, and allows 64-byte
// payloads.
func preparer() *Preparer {
	return &Preparer{
		Types: map[string]Options{
			"email": {Queue: Ptr("mail"), MaxAttempts: Ptr(7)},
			"plain": {},
		},
		MaxAttempts: 4, Timeout: time.Minute, MaxPayloadBytes: 64,
	}
}

// TestPrepareRefuses: every rejected task names what is wrong, wraps the
// sentinel and makes no insert. The messages are part of the API (the
// HTTP server and the CLI show them), so they are compared whole.
func TestPrepareRefuses(t *testing.T) {
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		name     string
		spec     Spec
		sentinel error
		msg      string
	}{
		{"empty type", Spec{Type: ""}, kerr.ErrInvalid,
			`keel: invalid input: invalid task type "": use 1-128 letters, digits, '_', '.', ':' or '-'`},
		{"bad type", Spec{Type: "a b"}, kerr.ErrInvalid,
			`keel: invalid input: invalid task type "a b": use 1-128 letters, digits, '_', '.', ':' or '-'`},
		{"reserved type", Spec{Type: "keel.notify.x"}, kerr.ErrInvalid,
			`keel: invalid input: task type "keel.notify.x": names starting with "keel." are reserved for keel's own tasks`},
		{"unknown type", Spec{Type: "other"}, kerr.ErrUnknownType,
			`keel: unknown task type "other": register a handler or declare it in Config.Types`},
		{"backoff at enqueue", Spec{Type: "plain", Options: opts(backoffOpt(time.Second, time.Minute))}, kerr.ErrInvalid,
			"keel: invalid input: Backoff is a per-type option: pass it to Handle, not Enqueue"},
		{"max snoozes at enqueue", Spec{Type: "plain", Options: opts(maxSnoozes(3))}, kerr.ErrInvalid,
			"keel: invalid input: MaxSnoozes is a per-type option: pass it to Handle, not Enqueue"},
		{"on_dead at enqueue", Spec{Type: "plain", Options: opts(onDead("followup"))}, kerr.ErrInvalid,
			"keel: invalid input: OnDead is a per-type option: pass it to Handle or Declare, not Enqueue"},
		{"brake at enqueue", Spec{Type: "plain", Options: opts(brake(driver.BrakeConfig{Window: -1}))}, kerr.ErrInvalid,
			"keel: invalid input: Brake is a per-type option: pass it to Handle or Declare, not Enqueue"},
		{"bad queue", Spec{Type: "plain", Options: opts(queue("a/b"))}, kerr.ErrInvalid,
			`keel: invalid input: invalid queue name "a/b": use 1-128 letters, digits, '_', '.', ':' or '-'`},
		{"keel's queue", Spec{Type: "plain", Options: opts(queue("keel"))}, kerr.ErrInvalid,
			`keel: invalid input: queue "keel" is reserved for keel's own tasks (alert deliveries, the drill)`},
		{"priority", Spec{Type: "plain", Options: opts(priority(1_000_001))}, kerr.ErrInvalid,
			"keel: invalid input: priority 1000001 out of range [-1000000, 1000000]"},
		{"negative delay", Spec{Type: "plain", Options: opts(delay(-time.Second))}, kerr.ErrInvalid,
			"keel: invalid input: negative delay -1s"},
		{"no attempts", Spec{Type: "plain", Options: opts(maxAttempts(0))}, kerr.ErrInvalid,
			"keel: invalid input: max attempts must be at least 1, got 0"},
		{"too many attempts", Spec{Type: "plain", Options: opts(maxAttempts(1001))}, kerr.ErrInvalid,
			"keel: invalid input: max attempts must be at most 1000, got 1001"},
		{"zero timeout", Spec{Type: "plain", Options: opts(timeout(0))}, kerr.ErrInvalid,
			"keel: invalid input: timeout must be positive, got 0s"},
		{"tiny timeout", Spec{Type: "plain", Options: opts(timeout(time.Microsecond))}, kerr.ErrInvalid,
			"keel: invalid input: timeout must be at least 1ms, got 1µs"},
		{"empty natural key", Spec{Type: "plain", Options: opts(uniqueBy(""))}, kerr.ErrInvalid,
			"keel: invalid input: UniqueBy natural key must be 1-1024 bytes, got 0"},
		{"long idempotency key", Spec{Type: "plain", Options: opts(idemKey(long))}, kerr.ErrInvalid,
			"keel: invalid input: idempotency key must be 1-255 bytes, got 256"},
		{"both keys", Spec{Type: "plain", Options: opts(uniqueBy("a"), idemKey("b"))}, kerr.ErrInvalid,
			"keel: invalid input: UniqueBy and IdempotencyKey are exclusive"},
		{"run_at and delay", Spec{Type: "plain", Options: opts(runAt(now), delay(time.Second))}, kerr.ErrInvalid,
			"keel: invalid input: RunAt and Delay are exclusive"},
		{"empty meta key", Spec{Type: "plain", Options: opts(meta(map[string]string{"": "v"}))}, kerr.ErrInvalid,
			"keel: invalid input: meta keys must be 1-128 bytes"},
		{"key not UTF-8", Spec{Type: "plain", Options: opts(idemKey("a\xffb"))}, kerr.ErrInvalid,
			"keel: invalid input: idempotency key is not valid UTF-8"},
		{"key with NUL", Spec{Type: "plain", Options: opts(idemKey("a\x00b"))}, kerr.ErrInvalid,
			`keel: invalid input: idempotency key contains the NUL character (\u0000)`},
		{"meta key not UTF-8", Spec{Type: "plain", Options: opts(meta(map[string]string{"\xff": "v"}))}, kerr.ErrInvalid,
			"keel: invalid input: meta key is not valid UTF-8"},
		{"meta value with NUL", Spec{Type: "plain", Options: opts(meta(map[string]string{"tenant": "a\x00"}))}, kerr.ErrInvalid,
			`keel: invalid input: meta "tenant" contains the NUL character (\u0000)`},
		{"payload too large", Spec{Type: "plain", Payload: map[string]string{"x": strings.Repeat("y", 64)}}, kerr.ErrPayloadTooLarge,
			"keel: payload too large: 72 bytes, the limit is 64"},
		{"payload not encodable", Spec{Type: "plain", Payload: make(chan int)}, kerr.ErrInvalid,
			"keel: invalid input: payload cannot be encoded as JSON: json: unsupported type: chan int"},
		{"payload not JSON", Spec{Type: "plain", Payload: []byte("{")}, kerr.ErrInvalid, ""},
		{"payload key twice", Spec{Type: "plain", Payload: json.RawMessage(`{"a":1,"a":2}`)}, kerr.ErrInvalid, ""},
		{"run_at before 1000", Spec{Type: "plain", Options: opts(runAt(time.Date(999, 12, 31, 23, 59, 59, 0, time.UTC)))}, kerr.ErrInvalid,
			"keel: invalid input: run_at 0999-12-31T23:59:59Z is out of range: use a time in the years 1000 to 9999 (UTC)"},
		{"run_at in 10000", Spec{Type: "plain", Options: opts(runAt(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)))}, kerr.ErrInvalid,
			"keel: invalid input: run_at 10000-01-01T00:00:00Z is out of range: use a time in the years 1000 to 9999 (UTC)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := preparer().Prepare(tc.spec, now, nil, false)
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("got %v (params %+v), want %v", err, p, tc.sentinel)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Fatalf("message\n got %q\nwant %q", err.Error(), tc.msg)
			}
			if p.Type != "" {
				t.Fatalf("params made for a refused task: %+v", p)
			}
		})
	}
}

// TestDelayOutOfRangeSaysHow: a delay that carries the run time past 9999
// says that the time is now plus the delay.
func TestDelayOutOfRangeSaysHow(t *testing.T) {
	d := 200 * 365 * 24 * time.Hour
	late := time.Date(9900, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := preparer().Prepare(Spec{Type: "plain", Options: opts(delay(d))}, late, nil, false)
	if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), "(now plus delay "+d.String()+") is out of range") {
		t.Fatalf("got %v", err)
	}
}

// TestPrepareEnqueueRefusesTickKeys: a caller's key may not look like a
// schedule's tick; the schedule's own task (Prepare) may.
func TestPrepareEnqueueRefusesTickKeys(t *testing.T) {
	key := scheduler.KeyPrefix + "nightly:1"
	spec := Spec{Type: "plain", Options: opts(idemKey(key))}
	_, err := preparer().PrepareEnqueue(spec, now, nil)
	want := `keel: invalid input: idempotency key "keel.schedule:nightly:1": keys starting with "keel.schedule:" are reserved for schedules' ticks`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	p, err := preparer().Prepare(Spec{Type: "unregistered", Options: opts(idemKey(key))}, now, nil, true)
	if err != nil || p.IdemKey != digest.ExplicitKey(key) {
		t.Fatalf("a schedule's task: %+v, %v", p, err)
	}
}

// TestAnyType: with AnyType a caller may enqueue a type this client does
// not know; without, it is ErrUnknownType.
func TestAnyType(t *testing.T) {
	pr := preparer()
	if _, err := pr.PrepareEnqueue(Spec{Type: "elsewhere"}, now, nil); !errors.Is(err, kerr.ErrUnknownType) {
		t.Fatalf("without AnyType: %v", err)
	}
	pr.AnyType = true
	if p, err := pr.PrepareEnqueue(Spec{Type: "elsewhere"}, now, nil); err != nil || p.Type != "elsewhere" {
		t.Fatalf("with AnyType: %+v, %v", p, err)
	}
	if _, err := pr.PrepareEnqueue(Spec{Type: "keel.drill"}, now, nil); !errors.Is(err, kerr.ErrInvalid) {
		t.Fatalf("keel's own type with AnyType: %v", err)
	}
}

// TestDefaults: a task's properties come from its options, else the
// client's registration of its type, else (when the registration sets
// none) the stored declaration, else the Preparer's defaults.
func TestDefaults(t *testing.T) {
	stored := map[string]*driver.TypeDefaults{
		"email":     {Name: "email", Queue: "stored", MaxAttempts: 2, Timeout: time.Hour},
		"plain":     {Name: "plain", Queue: "stored", Priority: Ptr(5), MaxAttempts: 2, Timeout: time.Hour},
		"elsewhere": {Name: "elsewhere", Queue: "far", Timeout: 2 * time.Hour},
	}
	type want struct {
		queue    string
		priority int
		attempts int
		timeout  time.Duration
		runAt    time.Time
	}
	for _, tc := range []struct {
		name   string
		spec   Spec
		stored map[string]*driver.TypeDefaults
		want   want
	}{
		{"nothing set", Spec{Type: "plain"}, nil, want{"default", 0, 4, time.Minute, now}},
		{"registration wins over stored", Spec{Type: "email"}, stored, want{"mail", 0, 7, time.Minute, now}},
		{"stored when registration sets none", Spec{Type: "plain"}, stored, want{"stored", 5, 2, time.Hour, now}},
		{"stored for an unregistered type", Spec{Type: "elsewhere"}, stored, want{"far", 0, 4, 2 * time.Hour, now}},
		{"call wins over registration", Spec{Type: "email", Options: opts(queue("urgent"), maxAttempts(1), priority(-3))}, stored,
			want{"urgent", -3, 1, time.Minute, now}},
		{"call wins over stored", Spec{Type: "plain", Options: opts(timeout(time.Second), priority(9))}, stored,
			want{"stored", 9, 2, time.Second, now}},
		{"later option wins", Spec{Type: "plain", Options: opts(queue("a"), nil, queue("b"))}, nil, want{"b", 0, 4, time.Minute, now}},
		{"run_at", Spec{Type: "plain", Options: opts(runAt(now.Add(time.Hour)))}, nil, want{"default", 0, 4, time.Minute, now.Add(time.Hour)}},
		{"delay", Spec{Type: "plain", Options: opts(delay(90 * time.Second))}, nil, want{"default", 0, 4, time.Minute, now.Add(90 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := preparer().Prepare(tc.spec, now, tc.stored, true)
			if err != nil {
				t.Fatal(err)
			}
			got := want{p.Queue, p.Priority, p.MaxAttempts, p.Timeout, p.RunAt}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if !p.Now.Equal(now) || p.Type != tc.spec.Type {
				t.Fatalf("Now %v, Type %q", p.Now, p.Type)
			}
		})
	}
}

// TestUndeclared: the types whose stored declarations apply are those
// registered without defaults and, with AnyType, valid unregistered ones;
// each once.
func TestUndeclared(t *testing.T) {
	specs := []Spec{{Type: "email"}, {Type: "plain"}, {Type: "plain"}, {Type: "elsewhere"}, {Type: "a b"}}
	pr := preparer()
	if got := pr.Undeclared(specs); len(got) != 1 || got[0] != "plain" {
		t.Fatalf("without AnyType: %q", got)
	}
	pr.AnyType = true
	if got := pr.Undeclared(specs); len(got) != 2 || got[0] != "plain" || got[1] != "elsewhere" {
		t.Fatalf("with AnyType: %q", got)
	}
}

// TestPayloadAndKeys: the payload is stored canonical (keys sorted, no
// spaces; nil is {}), its digest covers the type, and the idempotency key
// is the UniqueBy digest or the namespaced explicit key.
func TestPayloadAndKeys(t *testing.T) {
	pr := preparer()
	prep := func(spec Spec) driver.InsertParams {
		t.Helper()
		p, err := pr.Prepare(spec, now, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, payload := range []any{nil, json.RawMessage(`{"b": 2, "a": [1, 2.50]}`), []byte(`{"a":[1,2.50],"b":2}`),
		struct {
			B int   `json:"b"`
			A []int `json:"a"`
		}{2, []int{1}}} {
		p := prep(Spec{Type: "plain", Payload: payload})
		want := `{"a":[1,2.50],"b":2}`
		switch payload.(type) {
		case nil:
			want = `{}`
		case struct {
			B int   `json:"b"`
			A []int `json:"a"`
		}:
			want = `{"a":[1],"b":2}`
		}
		if string(p.Payload) != want {
			t.Fatalf("payload %v stored as %s, want %s", payload, p.Payload, want)
		}
		if p.PayloadDigest != digest.Sum([]byte("plain\x00"+want)) {
			t.Fatalf("digest %q does not cover the type and canonical payload", p.PayloadDigest)
		}
		if p.IdemKey != "" || p.Meta != nil {
			t.Fatalf("no key or meta asked for: %q %s", p.IdemKey, p.Meta)
		}
	}

	a := prep(Spec{Type: "plain", Payload: json.RawMessage(`{"x":1,"y":2}`), Options: opts(uniqueBy("n"))})
	b := prep(Spec{Type: "plain", Payload: json.RawMessage(`{ "y":2, "x":1 }`), Options: opts(uniqueBy("n"))})
	c := prep(Spec{Type: "plain", Payload: json.RawMessage(`{"x":1,"y":3}`), Options: opts(uniqueBy("n"))})
	d := prep(Spec{Type: "email", Payload: json.RawMessage(`{"x":1,"y":2}`), Options: opts(uniqueBy("n"))})
	if a.IdemKey != digest.UniqueKey("plain", "n", []byte(`{"x":1,"y":2}`)) || a.IdemKey != b.IdemKey {
		t.Fatalf("the same content gives keys %q and %q", a.IdemKey, b.IdemKey)
	}
	if c.IdemKey == a.IdemKey || d.IdemKey == a.IdemKey || d.PayloadDigest == a.PayloadDigest {
		t.Fatal("changed content or type gives the same key or digest")
	}

	e := prep(Spec{Type: "plain", Options: opts(idemKey("order-1"), meta(map[string]string{"tenant": "t1"}))})
	if e.IdemKey != "k:order-1" || string(e.Meta) != `{"tenant":"t1"}` {
		t.Fatalf("key %q meta %s", e.IdemKey, e.Meta)
	}
}

// TestLongInputIsShortened: an error never echoes a huge input.
func TestLongInputIsShortened(t *testing.T) {
	_, err := preparer().Prepare(Spec{Type: strings.Repeat("x", 10_000)}, now, nil, false)
	if !errors.Is(err, kerr.ErrInvalid) || len(err.Error()) > 400 {
		t.Fatalf("got %d bytes: %v", len(err.Error()), err)
	}
}
