package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// TestScheduleParamsRefuses: a bad schedule is ErrInvalid, naming the
// schedule and the field.
func TestScheduleParamsRefuses(t *testing.T) {
	ok := Schedule{Name: "nightly", Spec: "0 3 * * *", Type: "report.build"}
	for name, tc := range map[string]struct {
		mod  func(*Schedule)
		want string
	}{
		"no name":        {func(s *Schedule) { s.Name = "" }, `schedule "": invalid name: use 1-128 letters`},
		"no spec":        {func(s *Schedule) { s.Spec = "" }, `schedule "nightly": Spec is required`},
		"bad spec":       {func(s *Schedule) { s.Spec = "61 * * * *" }, `schedule "nightly": spec "61 * * * *"`},
		"unknown zone":   {func(s *Schedule) { s.TimeZone = "Mars/Olympus" }, `unknown time zone "Mars/Olympus"`},
		"bad type":       {func(s *Schedule) { s.Type = "a b" }, `schedule "nightly": invalid Type "a b"`},
		"reserved type":  {func(s *Schedule) { s.Type = "keel.drill" }, `Type "keel.drill": names starting with "keel." are reserved`},
		"bad queue":      {func(s *Schedule) { s.Queue = "a b" }, `schedule "nightly": invalid Queue "a b"`},
		"reserved queue": {func(s *Schedule) { s.Queue = "keel" }, `schedule "nightly": queue "keel" is reserved for keel's own tasks`},
		"priority":       {func(s *Schedule) { s.Priority = -2_000_000 }, `Priority -2000000 out of range [-1000000, 1000000]`},
		"missed":         {func(s *Schedule) { s.Missed = "always" }, `Missed must be "run_once" or "skip", got "always"`},
		"not JSON":       {func(s *Schedule) { s.Payload = []byte("{") }, "payload must be a JSON value"},
		"func payload":   {func(s *Schedule) { s.Payload = func() {} }, `schedule "nightly": payload cannot be encoded as JSON`},
		"key twice":      {func(s *Schedule) { s.Payload = json.RawMessage(`{"a":1,"a":2}`) }, `key "a" appears more than once`},
	} {
		s := ok
		tc.mod(&s)
		if _, err := s.Params(); !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", name, err, tc.want)
		}
	}
}

// TestScheduleParamsDefaults: the empty fields take their defaults.
func TestScheduleParamsDefaults(t *testing.T) {
	p, err := Schedule{Name: "n", Spec: "@every 90s", Type: "t"}.Params()
	if err != nil {
		t.Fatal(err)
	}
	if p.TimeZone != "UTC" || p.Queue != DefaultQueue || p.Missed != driver.MissedRunOnce || string(p.Payload) != "{}" {
		t.Fatalf("defaults %+v", p)
	}
	p, err = Schedule{Name: "n", Spec: "0 9 * * MON-FRI", TimeZone: "Europe/Berlin", Type: "t", Queue: "q",
		Payload: map[string]int{"a": 1}, Priority: 5, Missed: driver.MissedSkip}.Params()
	if err != nil || p.TimeZone != "Europe/Berlin" || p.Queue != "q" || p.Missed != driver.MissedSkip ||
		p.Priority != 5 || string(p.Payload) != `{"a":1}` {
		t.Fatalf("given %+v %v", p, err)
	}
}

// TestCheckSchedules names the schedule's index, bounds the payload and
// refuses a name twice.
func TestCheckSchedules(t *testing.T) {
	ok := Schedule{Name: "a", Spec: "@hourly", Type: "t"}
	if ps, err := CheckSchedules([]Schedule{ok, {Name: "b", Spec: "@daily", Type: "t"}}, 64); err != nil || len(ps) != 2 {
		t.Fatalf("%v %v", ps, err)
	}
	bad := ok
	bad.Spec = ""
	if _, err := CheckSchedules([]Schedule{ok, bad}, 64); !errors.Is(err, kerr.ErrInvalid) || !strings.HasPrefix(err.Error(), "Config.Schedules[1]: ") {
		t.Errorf("bad: %v", err)
	}
	big := ok
	big.Payload = json.RawMessage(`"` + strings.Repeat("x", 70) + `"`)
	if _, err := CheckSchedules([]Schedule{big}, 64); !errors.Is(err, kerr.ErrPayloadTooLarge) ||
		err.Error() != `Config.Schedules[0]: schedule "a": keel: payload too large: 72 bytes, the limit is 64` {
		t.Errorf("big: %v", err)
	}
	if _, err := CheckSchedules([]Schedule{ok, ok}, 64); !errors.Is(err, kerr.ErrInvalid) ||
		!strings.Contains(err.Error(), `Config.Schedules[1]: schedule name "a" used twice`) {
		t.Errorf("twice: %v", err)
	}
}

// TestScheduleTask: a schedule's task takes the schedule's queue,
// priority, key and meta; the stored declaration is read for a type
// without registered defaults, and not for one with.
func TestScheduleTask(t *testing.T) {
	var read []string
	stored := func(_ context.Context, types []string) (map[string]*driver.TypeDefaults, error) {
		read = append(read, types...)
		return map[string]*driver.TypeDefaults{"other": {Name: "other", MaxAttempts: 9}}, nil
	}
	row := &driver.ScheduleRow{Name: "n", Type: "other", Queue: "q", Priority: 3, Payload: json.RawMessage(`{"a":1}`)}
	p, err := preparer().ScheduleTask(context.Background(), stored, row, "keel.schedule:n:1", map[string]string{"m": "v"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Type != "other" || p.Queue != "q" || p.Priority != 3 || !strings.HasSuffix(p.IdemKey, "keel.schedule:n:1") || p.MaxAttempts != 9 ||
		string(p.Meta) != `{"m":"v"}` || string(p.Payload) != `{"a":1}` || !p.RunAt.Equal(now) {
		t.Fatalf("insert %+v", p)
	}
	row.Type = "email"
	if _, err := preparer().ScheduleTask(context.Background(), stored, row, "k", nil, now); err != nil || len(read) != 1 {
		t.Fatalf("a declared type: %v, read %v", err, read)
	}
	row.Payload = json.RawMessage(`"` + strings.Repeat("x", 70) + `"`)
	if _, err := preparer().ScheduleTask(context.Background(), stored, row, "k", nil, now); !errors.Is(err, kerr.ErrPayloadTooLarge) ||
		!strings.HasPrefix(err.Error(), "schedule n: ") {
		t.Fatalf("too large: %v", err)
	}
	down := errors.New("down")
	row.Type = "plain"
	_, err = preparer().ScheduleTask(context.Background(), func(context.Context, []string) (map[string]*driver.TypeDefaults, error) {
		return nil, down
	}, row, "k", nil, now)
	if !errors.Is(err, down) {
		t.Fatalf("stored fails: %v", err)
	}
}
