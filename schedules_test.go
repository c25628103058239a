package keel_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/keelq/keel"
)

// TestScheduleConfigBadInput: a bad schedule fails NewClient with
// ErrInvalid, naming the schedule and the field.
func TestScheduleConfigBadInput(t *testing.T) {
	t.Parallel()
	_, drv := setup(t)
	ok := keel.Schedule{Name: "nightly", Spec: "0 3 * * *", Type: "report.build"}
	cases := map[string]struct {
		mod  func(*keel.Schedule)
		want string
	}{
		"no name":          {func(s *keel.Schedule) { s.Name = "" }, "invalid name"},
		"name with space":  {func(s *keel.Schedule) { s.Name = "a b" }, `"a b": invalid name`},
		"no spec":          {func(s *keel.Schedule) { s.Spec = "" }, `"nightly": Spec is required`},
		"bad spec":         {func(s *keel.Schedule) { s.Spec = "61 * * * *" }, `"nightly": spec "61 * * * *"`},
		"four fields":      {func(s *keel.Schedule) { s.Spec = "* * * *" }, `"nightly": spec`},
		"bad every":        {func(s *keel.Schedule) { s.Spec = "@every ten" }, `"nightly": spec "@every ten"`},
		"zone in spec":     {func(s *keel.Schedule) { s.Spec = "CRON_TZ=UTC 0 3 * * *" }, "set the time zone instead"},
		"unknown zone":     {func(s *keel.Schedule) { s.TimeZone = "Mars/Olympus" }, `unknown time zone "Mars/Olympus"`},
		"Local zone":       {func(s *keel.Schedule) { s.TimeZone = "Local" }, `unknown time zone "Local"`},
		"no type":          {func(s *keel.Schedule) { s.Type = "" }, `"nightly": invalid Type`},
		"reserved type":    {func(s *keel.Schedule) { s.Type = "keel.drill" }, "reserved"},
		"bad queue":        {func(s *keel.Schedule) { s.Queue = "a queue" }, `"nightly": invalid Queue`},
		"reserved queue":   {func(s *keel.Schedule) { s.Queue = "keel" }, `queue "keel" is reserved`},
		"priority":         {func(s *keel.Schedule) { s.Priority = 2_000_000 }, "Priority 2000000 out of range"},
		"missed policy":    {func(s *keel.Schedule) { s.Missed = "always" }, `Missed must be "run_once" or "skip"`},
		"payload not JSON": {func(s *keel.Schedule) { s.Payload = []byte("{") }, "payload must be a JSON value"},
		"payload too big":  {func(s *keel.Schedule) { s.Payload = map[string]string{"a": strings.Repeat("x", 70_000)} }, "over the limit of 65536"},
		"payload func":     {func(s *keel.Schedule) { s.Payload = func() {} }, "cannot be encoded as JSON"},
		// Issue 27, item 10: intervals under a second fired every second,
		// and a payload no trigger can enqueue passed.
		"every 0s":            {func(s *keel.Schedule) { s.Spec = "@every 0s" }, `"nightly": spec "@every 0s": the interval must be at least 1s`},
		"every -1s":           {func(s *keel.Schedule) { s.Spec = "@every -1s" }, `spec "@every -1s": the interval must be at least 1s`},
		"every 1ns":           {func(s *keel.Schedule) { s.Spec = "@every 1ns" }, `spec "@every 1ns": the interval must be at least 1s`},
		"every 999ms":         {func(s *keel.Schedule) { s.Spec = "@every 999ms" }, `the interval must be at least 1s`},
		"every 1.5s":          {func(s *keel.Schedule) { s.Spec = "@every 1.5s" }, `spec "@every 1.5s": the interval must be whole seconds`},
		"payload NUL":         {func(s *keel.Schedule) { s.Payload = map[string]string{"s": "a\x00b"} }, `"nightly": payload contains the NUL character`},
		"payload surrogate":   {func(s *keel.Schedule) { s.Payload = []byte(`"\ud800"`) }, `"nightly": payload contains a lone UTF-16 surrogate`},
		"payload repeat key":  {func(s *keel.Schedule) { s.Payload = []byte(`{"a":1,"a":2}`) }, `"nightly": payload: key "a" appears more than once`},
		"payload nested deep": {func(s *keel.Schedule) { s.Payload = []byte(strings.Repeat("[", 32) + strings.Repeat("]", 32)) }, `"nightly": payload is nested deeper than 31 levels`},
	}
	for name, c := range cases {
		s := ok
		c.mod(&s)
		cl, err := keel.NewClient(keel.Config{Driver: drv, Schedules: []keel.Schedule{s}})
		if !errors.Is(err, keel.ErrInvalid) || cl != nil || !strings.Contains(err.Error(), "Config.Schedules[0]") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewClient returned %v; want ErrInvalid naming Config.Schedules[0] and %q", name, err, c.want)
		}
	}
	_, err := keel.NewClient(keel.Config{Driver: drv, Schedules: []keel.Schedule{ok, ok}})
	if !errors.Is(err, keel.ErrInvalid) || !strings.Contains(err.Error(), `Config.Schedules[1]: schedule name "nightly" used twice`) {
		t.Errorf("a name used twice: %v", err)
	}
	for _, spec := range []string{"*/5 * * * *", "*/10 * * * * *", "@hourly", "@every 90s", "@every 1s", "@every 1m30s", "0 9 * * MON-FRI"} {
		s := ok
		s.Spec, s.TimeZone, s.Missed = spec, "America/New_York", keel.MissedSkip
		if _, err := keel.NewClient(keel.Config{Driver: drv, Schedules: []keel.Schedule{s}}); err != nil {
			t.Errorf("spec %q must be valid: %v", spec, err)
		}
	}
	c, err := keel.NewClient(keel.Config{Driver: drv})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.Schedules(t.Context())
	if err != nil || len(list) != 0 {
		t.Fatalf("schedules stored by refused configs: %v %v", list, err)
	}
}

// TestScheduleKeysReserved: users cannot take a schedule tick's
// idempotency key (a held key with another payload would stop the tick).
func TestScheduleKeysReserved(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	_, err := c.Enqueue(t.Context(), "t.known", nil, keel.IdempotencyKey("keel.schedule:nightly:1893456000"))
	if !errors.Is(err, keel.ErrInvalid) || !strings.Contains(err.Error(), "reserved for schedules' ticks") {
		t.Fatalf("enqueue with a tick's key: %v, want ErrInvalid", err)
	}
	if n, err := c.Counts(t.Context()); err != nil || len(n) != 0 {
		t.Fatalf("the refused enqueue wrote %v (%v)", n, err)
	}
	if _, err := c.Enqueue(t.Context(), "t.known", nil, keel.IdempotencyKey("keel.schedulex")); err != nil {
		t.Fatalf("a key that only looks alike: %v", err)
	}
}
