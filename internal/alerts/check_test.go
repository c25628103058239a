package alerts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// okRules are valid rules.
var okRules = Rules{DeadPerHour: 3, FailureRatio: 0.5, FailureMinAttempts: 20, FailureWindow: 5 * time.Minute}

func TestCheckConfig(t *testing.T) {
	broken := errors.New("webhook w: url must be an http(s) URL")
	var checked []string
	named := func(name string) *Configured {
		return &Configured{Name: name, Validate: func() error { checked = append(checked, name); return nil }}
	}
	for _, c := range []struct {
		name              string
		interval, retries time.Duration
		notifiers         []*Configured
		want              string
	}{
		{name: "none", interval: time.Second, retries: time.Second},
		{name: "some", notifiers: []*Configured{named("chat"), {Name: "pager-2"}}},
		{name: "interval", interval: -1, retries: time.Minute,
			want: "Config.Alerts: Interval and RetryMax must be positive, got -1ns and 1m0s"},
		{name: "retry max", interval: time.Second, retries: -time.Second,
			want: "Config.Alerts: Interval and RetryMax must be positive, got 1s and -1s"},
		{name: "settings first", interval: -1, notifiers: []*Configured{nil},
			want: "Config.Alerts: Interval and RetryMax must be positive, got -1ns and 0s"},
		{name: "nil", notifiers: []*Configured{named("a"), nil}, want: "Config.Alerts.Notifiers[1] is nil"},
		{name: "bad name", notifiers: []*Configured{{Name: "A b"}},
			want: `Config.Alerts.Notifiers[0]: invalid name "A b": use 1-64 of a-z, 0-9, '_' and '-'`},
		{name: "empty name", notifiers: []*Configured{{Name: ""}},
			want: `Config.Alerts.Notifiers[0]: invalid name "": use 1-64 of a-z, 0-9, '_' and '-'`},
		{name: "log", notifiers: []*Configured{{Name: "log"}},
			want: `Config.Alerts.Notifiers[0]: name "log" used twice ("log" is keel's own)`},
		{name: "twice", notifiers: []*Configured{{Name: "x"}, {Name: "x"}},
			want: `Config.Alerts.Notifiers[1]: name "x" used twice ("log" is keel's own)`},
		{name: "own check", notifiers: []*Configured{{Name: "w", Validate: func() error { return broken }}},
			want: "Config.Alerts.Notifiers[0]: webhook w: url must be an http(s) URL"},
	} {
		err := CheckConfig(okRules, c.interval, c.retries, c.notifiers)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want):
			t.Errorf("%s: %v, want ErrInvalid: %s", c.name, err, c.want)
		}
	}
	err := CheckConfig(Rules{DeadPerHour: -2}, -1, 0, []*Configured{nil})
	if !errors.Is(err, kerr.ErrInvalid) || !strings.HasPrefix(err.Error(), "keel: invalid input: alert rules: dead_per_hour") {
		t.Fatalf("the rules are checked first: %v", err)
	}
	if len(checked) != 2 || checked[0] != "chat" || checked[1] != "a" {
		t.Fatalf("own checks ran for %v, want chat then a", checked)
	}
	for name, want := range map[string]bool{"a": true, "0-x_y": true, "-a": false, "A": false,
		string(make([]byte, 65)): false, "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcd": true} {
		if ValidNotifierName(name) != want {
			t.Errorf("ValidNotifierName(%q) = %v", name, !want)
		}
	}
}

func TestCheckFilter(t *testing.T) {
	f := driver.AlertFilter{Rule: RuleNodeLost}
	if err := CheckFilter(&f); err != nil || f.Limit != 100 {
		t.Fatalf("default limit: %v, %d", err, f.Limit)
	}
	for _, c := range []struct {
		f    driver.AlertFilter
		want string
	}{
		{driver.AlertFilter{Limit: 1001}, "limit must be in 1..1000, got 1001"},
		{driver.AlertFilter{BeforeID: -1}, "before_id must not be negative, got -1"},
		{driver.AlertFilter{Since: time.Date(900, 1, 1, 0, 0, 0, 0, time.UTC)},
			"fired_after 0900-01-01T00:00:00Z is out of range: use a time in the years 1000 to 9999 (UTC)"},
	} {
		err := CheckFilter(&c.f)
		if !errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want {
			t.Errorf("%+v: %v, want %s", c.f, err, c.want)
		}
	}
}

func TestRulesValidate(t *testing.T) {
	ok := Rules{DeadPerHour: -1, OldestReadyAge: time.Minute, FailureRatio: 0.5, FailureMinAttempts: 1, FailureWindow: time.Hour}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	err := Rules{DeadPerHour: -2, FailureRatio: 2}.Validate()
	const want = "keel: invalid input: alert rules: dead_per_hour must be -1 (off) or more, got -2\n" +
		"failure_ratio must be in [0, 1) (0 turns the rule off), got 2\n" +
		"failure_min_attempts must be at least 1, got 0\n" +
		`failure_window must be in 1m..1h (the history keeps minutes; stats read the last hour), got "0s"`
	if !errors.Is(err, kerr.ErrInvalid) || err.Error() != want {
		t.Fatalf("%v\nwant %s", err, want)
	}
}

// alertsTable is a fake alerts table of one alert, id 1; err fails
// every read.
type alertsTable struct {
	listed []driver.AlertFilter
	err    error
}

func (s *alertsTable) ListAlerts(ctx context.Context, f driver.AlertFilter) ([]driver.AlertRow, error) {
	s.listed = append(s.listed, f)
	return []driver.AlertRow{{ID: 1}}, s.err
}

func (s *alertsTable) GetAlert(ctx context.Context, id int64) (*driver.AlertRow, error) {
	if s.err != nil {
		return nil, s.err
	}
	if id != 1 {
		return nil, fmt.Errorf("alert %d: %w", id, driver.ErrNotFound)
	}
	return &driver.AlertRow{ID: 1}, nil
}

func TestListAndGet(t *testing.T) {
	ctx := context.Background()
	wrap := func(ctx context.Context, err error) error { return errors.Join(errors.New("wrapped"), err) }
	s := &alertsTable{}
	if rows, err := List(ctx, s, driver.AlertFilter{Open: true}, wrap); err != nil || len(rows) != 1 || s.listed[0].Limit != 100 {
		t.Fatalf("list: %v, %v, %+v", rows, err, s.listed)
	}
	if _, err := List(ctx, s, driver.AlertFilter{Limit: 5000}, wrap); !errors.Is(err, kerr.ErrInvalid) || len(s.listed) != 1 {
		t.Fatalf("a bad filter: %v, listed %d times", err, len(s.listed))
	}
	if row, err := Get(ctx, s, 1, wrap); err != nil || row.ID != 1 {
		t.Fatalf("get: %v, %v", row, err)
	}
	if _, err := Get(ctx, s, 2, wrap); !errors.Is(err, driver.ErrNotFound) || err.Error() != "keel: task not found: no alert 2" {
		t.Fatalf("get a missing alert: %v", err)
	}
	s.err = errors.New("down")
	if _, err := List(ctx, s, driver.AlertFilter{}, wrap); !errors.Is(err, s.err) || err.Error() != "keel: list alerts: wrapped\ndown" {
		t.Fatalf("list failed: %v", err)
	}
	if _, err := Get(ctx, s, 1, wrap); !errors.Is(err, s.err) || err.Error() != "keel: get alert: wrapped\ndown" {
		t.Fatalf("get failed: %v", err)
	}
}
