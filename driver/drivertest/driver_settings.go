package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Runtime settings: PatchSetting and ListSettings.

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

func sameSetting(a, b driver.Setting) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Paused == b.Paused && a.Concurrency == b.Concurrency &&
		a.Timeout == b.Timeout && a.MaxAttempts == b.MaxAttempts && a.BackoffBase == b.BackoffBase &&
		a.BackoffMax == b.BackoffMax && a.UpdatedAt.Equal(b.UpdatedAt) && a.Rate == b.Rate && a.Burst == b.Burst
}

// patch applies p a second after the clock's last time and checks both the
// returned and the stored row against want (with p's kind, name and time).
func (e *env) patch(p driver.SettingPatch, want driver.Setting) {
	e.t.Helper()
	p.Now = e.clock.Advance(time.Second)
	want.Kind, want.Name, want.UpdatedAt = p.Kind, p.Name, p.Now
	got, err := e.drv.PatchSetting(e.ctx, p)
	if err != nil {
		e.t.Fatalf("patch %s %s: %v", p.Kind, p.Name, err)
	}
	if !sameSetting(*got, want) {
		e.t.Fatalf("patch returned\n %+v\nwant %+v", *got, want)
	}
	if stored := e.setting(p.Kind, p.Name); !sameSetting(stored, want) {
		e.t.Fatalf("patch stored\n %+v\nwant %+v", stored, want)
	}
}

// setting returns the stored setting kind/name, failing if there is none.
func (e *env) setting(kind driver.SettingKind, name string) driver.Setting {
	e.t.Helper()
	all, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		e.t.Fatalf("list settings: %v", err)
	}
	for _, s := range all {
		if s.Kind == kind && s.Name == name {
			return s
		}
	}
	e.t.Fatalf("no setting %s %s in %+v", kind, name, all)
	return driver.Setting{}
}

func testPatchSetting(t *testing.T, e *env) {
	q, ty := driver.SettingQueue, driver.SettingType
	e.patch(driver.SettingPatch{Kind: q, Name: "emails", Paused: ptr(true)}, driver.Setting{Paused: true})
	e.patch(driver.SettingPatch{Kind: q, Name: "emails", Concurrency: ptr(4)}, driver.Setting{Paused: true, Concurrency: 4})
	e.patch(driver.SettingPatch{Kind: q, Name: "emails", Paused: ptr(false)}, driver.Setting{Concurrency: 4})
	queueRow := e.setting(q, "emails")

	all := driver.Setting{Timeout: 1500 * time.Millisecond, MaxAttempts: 7, BackoffBase: 2 * time.Second, BackoffMax: time.Minute}
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", Timeout: ptr(all.Timeout), MaxAttempts: ptr(all.MaxAttempts),
		BackoffBase: ptr(all.BackoffBase), BackoffMax: ptr(all.BackoffMax)}, all)
	if got := e.setting(q, "emails"); !sameSetting(got, queueRow) {
		t.Fatalf("patching the type changed the queue of the same name: %+v", got)
	}
	cleared := all
	cleared.MaxAttempts = 0
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", MaxAttempts: ptr(0)}, cleared)
	cleared.Timeout, cleared.Paused = 0, true
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", Timeout: ptr(time.Duration(0)), Paused: ptr(true)}, cleared)
	cleared.BackoffBase, cleared.BackoffMax = 0, 0
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", BackoffBase: ptr(time.Duration(0)), BackoffMax: ptr(time.Duration(0))}, cleared)
	// Nothing to change still records the time.
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails"}, cleared)

	before, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.drv.PatchSetting(e.ctx, driver.SettingPatch{Kind: "node", Name: "x", Paused: ptr(true), Now: e.clock.Now()}); err == nil {
		t.Fatal("patch of an unknown kind: no error")
	}
	if after, err := e.drv.ListSettings(e.ctx); err != nil || len(after) != len(before) {
		t.Fatalf("rejected patch wrote: %d settings, want %d (%v)", len(after), len(before), err)
	}
}

func testPatchSettingConcurrent(t *testing.T, e *env) {
	now := e.clock.Now()
	for round := range 8 {
		name := fmt.Sprintf("type-%d", round)
		patches := []driver.SettingPatch{
			{Paused: ptr(true)}, {Concurrency: ptr(3)}, {Timeout: ptr(3 * time.Second)},
			{MaxAttempts: ptr(9)}, {BackoffBase: ptr(time.Second)}, {BackoffMax: ptr(time.Minute)},
		}
		if round%2 == 1 {
			// The row exists already: concurrent updates rather than inserts.
			if _, err := e.drv.PatchSetting(e.ctx, driver.SettingPatch{Kind: driver.SettingType, Name: name, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		startLine := make(chan struct{})
		errs := make(chan error, len(patches))
		for _, p := range patches {
			p.Kind, p.Name, p.Now = driver.SettingType, name, now
			go func() {
				<-startLine
				_, err := e.drv.PatchSetting(e.ctx, p)
				errs <- err
			}()
		}
		close(startLine)
		for range patches {
			if err := <-errs; err != nil {
				t.Fatalf("concurrent patch: %v", err)
			}
		}
		want := driver.Setting{Kind: driver.SettingType, Name: name, Paused: true, Concurrency: 3, Timeout: 3 * time.Second,
			MaxAttempts: 9, BackoffBase: time.Second, BackoffMax: time.Minute, UpdatedAt: now}
		if got := e.setting(driver.SettingType, name); !sameSetting(got, want) {
			t.Fatalf("round %d: a concurrent patch was lost:\n got %+v\nwant %+v", round, got, want)
		}
	}
}

func testListSettingsOrder(t *testing.T, e *env) {
	if all, err := e.drv.ListSettings(e.ctx); err != nil || len(all) != 0 {
		t.Fatalf("settings of a new database: %+v, %v", all, err)
	}
	now := e.clock.Now()
	for _, s := range []struct {
		kind driver.SettingKind
		name string
	}{{driver.SettingType, "b"}, {driver.SettingQueue, "z"}, {driver.SettingType, "a"}, {driver.SettingQueue, "a"}, {driver.SettingQueue, "B"}} {
		if _, err := e.drv.PatchSetting(e.ctx, driver.SettingPatch{Kind: s.kind, Name: s.name, Concurrency: ptr(1), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range all {
		got = append(got, string(s.Kind)+" "+s.Name)
		if s.Concurrency != 1 || !s.UpdatedAt.Equal(now) {
			t.Fatalf("listed %+v", s)
		}
	}
	if want := []string{"queue B", "queue a", "queue z", "type a", "type b"}; !slices.Equal(got, want) {
		t.Fatalf("settings listed as %q, want %q", got, want)
	}
}
