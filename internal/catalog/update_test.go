package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/catalog"
	"github.com/keelq/keel/internal/kerr"
)

func TestMaxRateIsKeels(t *testing.T) {
	if catalog.MaxRate != keel.MaxRate || catalog.MaxBurst != keel.MaxBurst {
		t.Fatalf("catalog's %d and %d, keel's %d and %d", catalog.MaxRate, catalog.MaxBurst, keel.MaxRate, keel.MaxBurst)
	}
}

// TestCheckPatch: the rules of UpdateQueue and UpdateType, the first
// problem reported in the order they check.
func TestCheckPatch(t *testing.T) {
	n := func(v int) *int { return &v }
	f := func(v float64) *float64 { return &v }
	d := func(v time.Duration) *time.Duration { return &v }
	yes := true
	queue := func(p driver.SettingPatch) driver.SettingPatch {
		p.Kind, p.Name = driver.SettingQueue, "mail"
		return p
	}
	typ := func(p driver.SettingPatch) driver.SettingPatch {
		p.Kind, p.Name = driver.SettingType, "mail.send"
		return p
	}
	for _, c := range []struct {
		p    driver.SettingPatch
		want string // "": accepted
	}{
		{queue(driver.SettingPatch{Paused: &yes}), ""},
		{queue(driver.SettingPatch{Concurrency: n(0), Rate: f(0), Burst: n(0)}), ""},
		{queue(driver.SettingPatch{Concurrency: n(10000), Rate: f(catalog.MaxRate), Burst: n(catalog.MaxBurst)}), ""},
		{driver.SettingPatch{Kind: driver.SettingQueue, Name: "bad queue", Paused: &yes}, `invalid queue name "bad queue"`},
		{queue(driver.SettingPatch{}), "nothing to change"},
		{queue(driver.SettingPatch{Concurrency: n(10001)}), "concurrency must be in 0..10000, got 10001"},
		{queue(driver.SettingPatch{Concurrency: n(-1), Rate: f(-1)}), "concurrency must be in 0..10000, got -1"},
		{queue(driver.SettingPatch{Rate: f(math.NaN())}), "rate must be a number of tasks per second in 0..1000000 (0 clears it), got NaN"},
		{queue(driver.SettingPatch{Rate: f(math.Inf(1))}), "rate must be a number of tasks per second in 0..1000000 (0 clears it), got +Inf"},
		{queue(driver.SettingPatch{Burst: n(catalog.MaxBurst + 1)}), "burst must be in 0..1000000 (0: the default, max(1, ceil(rate))), got 1000001"},

		{typ(driver.SettingPatch{Timeout: d(time.Second), MaxAttempts: n(1000), BackoffBase: d(time.Second), BackoffMax: d(time.Second)}), ""},
		{typ(driver.SettingPatch{Timeout: d(0), MaxAttempts: n(0), BackoffBase: d(time.Hour), BackoffMax: d(0)}), ""},
		{driver.SettingPatch{Kind: driver.SettingType, Name: "", Paused: &yes}, `invalid task type ""`},
		{typ(driver.SettingPatch{}), "nothing to change"},
		{typ(driver.SettingPatch{Concurrency: n(-1), Rate: f(-1)}), "rate must be a number of tasks per second in 0..1000000 (0 clears it), got -1"},
		{typ(driver.SettingPatch{Concurrency: n(20000), MaxAttempts: n(-1)}), "concurrency must be in 0..10000, got 20000"},
		{typ(driver.SettingPatch{MaxAttempts: n(1001), Timeout: d(-1)}), "max_attempts must be in 1..1000, got 1001"},
		{typ(driver.SettingPatch{Timeout: d(25 * time.Hour)}), `timeout must be in 1ms..24h, got "25h"`},
		{typ(driver.SettingPatch{Timeout: d(time.Nanosecond), BackoffBase: d(-time.Second)}), `timeout must be in 1ms..24h, got "1ns"`},
		{typ(driver.SettingPatch{BackoffBase: d(1500 * time.Microsecond)}), `backoff_base must be a whole number of milliseconds (settings are stored in ms), got "1.5ms"`},
		{typ(driver.SettingPatch{BackoffMax: d(200 * time.Hour)}), `backoff_max must be in 1ms..168h, got "200h"`},
		{typ(driver.SettingPatch{BackoffBase: d(time.Minute), BackoffMax: d(time.Second)}), "backoff_max (1s) must not be below backoff_base (1m0s)"},
	} {
		err := catalog.CheckPatch(c.p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %q refused: %v", c.p.Kind, c.p.Name, err)
		case c.want != "" && (!errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want):
			t.Errorf("%s %q: %v, want %q", c.p.Kind, c.p.Name, err, c.want)
		}
	}
}

// patchStore keeps the patches it stores, or fails.
type patchStore struct {
	got []driver.SettingPatch
	err error
}

func (s *patchStore) PatchSetting(_ context.Context, p driver.SettingPatch) (*driver.Setting, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.got = append(s.got, p)
	return &driver.Setting{Kind: p.Kind, Name: p.Name, Paused: p.Paused != nil && *p.Paused, UpdatedAt: p.Now}, nil
}

// TestPatcher: a checked patch is stored as of now; a bad one never
// reaches the store; a failed write says what it updated.
func TestPatcher(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := &patchStore{}
	pt := catalog.Patcher{Store: st, Now: func() time.Time { return now }}
	yes, bad := true, -1
	s, err := pt.Patch(context.Background(), driver.SettingPatch{Kind: driver.SettingQueue, Name: "mail", Paused: &yes})
	if err != nil || !s.Paused || !s.UpdatedAt.Equal(now) || len(st.got) != 1 || !st.got[0].Now.Equal(now) {
		t.Fatalf("patch: %+v, %v; stored %+v", s, err, st.got)
	}
	_, err = pt.Patch(context.Background(), driver.SettingPatch{Kind: driver.SettingType, Name: "t", MaxAttempts: &bad})
	if !errors.Is(err, kerr.ErrInvalid) || len(st.got) != 1 {
		t.Fatalf("bad patch: %v; stored %+v", err, st.got)
	}
	st.err = errors.New("down")
	pt.Wrap = func(_ context.Context, err error) error { return fmt.Errorf("unreachable: %w", err) }
	_, err = pt.Patch(context.Background(), driver.SettingPatch{Kind: driver.SettingType, Name: "mail.send", Paused: &yes})
	if !errors.Is(err, st.err) || err.Error() != "keel: update type mail.send: unreachable: down" {
		t.Fatalf("failed write: %v", err)
	}
}
