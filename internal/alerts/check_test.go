package alerts

import (
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

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
		err := CheckConfig(c.interval, c.retries, c.notifiers)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want):
			t.Errorf("%s: %v, want ErrInvalid: %s", c.name, err, c.want)
		}
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
