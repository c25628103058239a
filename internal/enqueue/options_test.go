package enqueue

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// TestValidateTypeOptions: the per-type options (given to Handle or
// Declare) are checked too, naming the bad value.
func TestValidateTypeOptions(t *testing.T) {
	for _, tc := range []struct {
		o   func(*Options)
		msg string
	}{
		{maxSnoozes(0), "max snoozes must be in 1..1000000, got 0"},
		{maxSnoozes(MaxSnoozesLimit + 1), "max snoozes must be in 1..1000000, got 1000001"},
		{onDead("a b"), `invalid on_dead type "a b": use 1-128 letters, digits, '_', '.', ':' or '-'`},
		{onDead("keel.x"), `on_dead type "keel.x": names starting with "keel." are reserved for keel's own tasks`},
		{brake(driver.BrakeConfig{Window: 10001}), "brake window must be in 1..10000 (0: the default), got 10001"},
		{brake(driver.BrakeConfig{Threshold: 1.5}), "brake threshold must be in (0, 1] (0: the default), got 1.5"},
		{brake(driver.BrakeConfig{Threshold: math.NaN()}), "brake threshold must be in (0, 1] (0: the default), got NaN"},
		{brake(driver.BrakeConfig{Cooldown: -time.Second}), "brake cooldown must not be negative (0: the default), got -1s"},
		{brake(driver.BrakeConfig{Cooldown: time.Microsecond}),
			"brake cooldown must be a whole number of milliseconds (settings are stored in ms), got 1µs"},
		{backoffOpt(0, time.Second), "backoff needs 0 < base <= max, got base 0s max 1s"},
		{backoffOpt(time.Minute, time.Second), "backoff needs 0 < base <= max, got base 1m0s max 1s"},
	} {
		err := Merge(Options{}, opts(tc.o)).Validate()
		if !errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+tc.msg {
			t.Errorf("got %v, want %s", err, tc.msg)
		}
	}
	good := Merge(Options{}, opts(maxSnoozes(5), onDead("followup"), brake(driver.BrakeConfig{Window: -1}),
		backoffOpt(time.Second, time.Minute), brake(driver.BrakeConfig{Window: 50, Threshold: 0.5, Cooldown: time.Second})))
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDeclarations: the defaults a registration stores, and the enqueue
// defaults read back from a stored declaration.
func TestDeclarations(t *testing.T) {
	if (Options{}).Declared() || (Options{Meta: map[string]string{"a": "b"}}).Declared() {
		t.Fatal("no stored default, yet declared")
	}
	o := Merge(Options{}, opts(queue("mail"), priority(3), maxAttempts(5), timeout(time.Second),
		backoffOpt(time.Second, time.Minute), onDead("followup"), brake(driver.BrakeConfig{Window: 20})))
	o.OnDeadHook = true
	td := o.TypeDefaults("email")
	if td.Name != "email" || td.Queue != "mail" || *td.Priority != 3 || td.MaxAttempts != 5 || td.Timeout != time.Second ||
		td.BackoffBase != time.Second || td.BackoffMax != time.Minute || td.OnDead != "followup" || !td.OnDeadHook ||
		td.Brake.Window != 20 {
		t.Fatalf("type defaults %+v", td)
	}
	got := DeclaredTypes(map[string]Options{"email": o, "plain": {}, "hooked": {OnDeadHook: true}})
	if len(got) != 2 {
		t.Fatalf("declared %+v", got)
	}
	back := StoredOptions(&td)
	if *back.Queue != "mail" || *back.Priority != 3 || *back.MaxAttempts != 5 || *back.Timeout != time.Second ||
		back.Backoff != nil || back.OnDead != nil || back.Brake != nil {
		t.Fatalf("stored options %+v", back)
	}
	if none := StoredOptions(&driver.TypeDefaults{Name: "x"}); none.Declared() || StoredOptions(nil).Declared() {
		t.Fatalf("an empty declaration sets %+v", none)
	}
}

// TestCheckTimeFilters: a zero time is no filter; one outside the years
// 1000 to 9999 is refused by name.
func TestCheckTimeFilters(t *testing.T) {
	if err := CheckTimeFilters("after", time.Time{}, "before", now); err != nil {
		t.Fatal(err)
	}
	err := CheckTimeFilters("after", now, "before", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	want := "keel: invalid input: before 10000-01-01T00:00:00Z is out of range: use a time in the years 1000 to 9999 (UTC)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v", err)
	}
}
