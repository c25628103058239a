package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// The automatic brake's rows: every change is conditional on the state it
// changes from (and, for the probe, on its owner).

func (e *env) braker() driver.Braker {
	e.t.Helper()
	b, ok := e.drv.(driver.Braker)
	if !ok {
		e.t.Skip("driver does not implement driver.Braker")
	}
	return b
}

func (e *env) brakes() map[string]driver.BrakeRow {
	e.t.Helper()
	rows, err := e.braker().ListBrakes(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]driver.BrakeRow{}
	for _, r := range rows {
		out[r.Type] = r
	}
	return out
}

func (e *env) changeBrake(c driver.BrakeChange) bool {
	e.t.Helper()
	ok, err := e.braker().ChangeBrake(e.ctx, c)
	if err != nil {
		e.t.Fatalf("change brake %+v: %v", c, err)
	}
	return ok
}

// testBrakeTransitions: open from closed (no row), half-open, the probe,
// close; each change applies only from its states, and the row reads back
// as written.
func testBrakeTransitions(t *testing.T, e *env) {
	b := e.braker()
	if rows := e.brakes(); len(rows) != 0 {
		t.Fatalf("brakes before any: %+v", rows)
	}
	now := e.clock.Now()
	open := driver.BrakeRow{Type: "dt.flaky", State: driver.BrakeOpen, OpenedAt: now, Until: now.Add(30 * time.Second),
		Ratio: 0.75, Attempts: 20, Reason: "15 of the last 20 attempts failed"}
	fromClosed := driver.BrakeChange{To: open, From: []driver.BrakeState{driver.BrakeClosed}, Now: now}
	if !e.changeBrake(fromClosed) {
		t.Fatal("open from closed (no row) did not apply")
	}
	if e.changeBrake(fromClosed) {
		t.Fatal("open from closed applied to an open brake")
	}
	got := e.brakes()["dt.flaky"]
	if got.State != driver.BrakeOpen || !got.OpenedAt.Equal(now) || !got.Until.Equal(open.Until) || got.Ratio != 0.75 ||
		got.Attempts != 20 || got.Reason != open.Reason || !got.ClosedAt.IsZero() || got.ProbeOwner != "" || got.ProbeTaskID != 0 ||
		!got.UpdatedAt.Equal(now) {
		t.Fatalf("open brake reads %+v", got)
	}
	half := got
	half.State = driver.BrakeHalfOpen
	if !e.changeBrake(driver.BrakeChange{To: half, From: []driver.BrakeState{driver.BrakeOpen}, Now: now}) {
		t.Fatal("half-open from open did not apply")
	}
	// The probe: taken by one owner, recorded by that owner only.
	taken := half
	taken.ProbeOwner, taken.ProbeAt = "w1", now.Add(time.Second)
	take := driver.BrakeChange{To: taken, From: []driver.BrakeState{driver.BrakeHalfOpen}, OwnerCheck: true, Now: now}
	if !e.changeBrake(take) {
		t.Fatal("taking a free probe did not apply")
	}
	taken2 := taken
	taken2.ProbeOwner = "w2"
	if e.changeBrake(driver.BrakeChange{To: taken2, From: []driver.BrakeState{driver.BrakeHalfOpen}, OwnerCheck: true, Now: now}) {
		t.Fatal("a taken probe was taken again")
	}
	recorded := taken
	recorded.ProbeTaskID, recorded.ProbeAttempt = 42, 3
	if e.changeBrake(driver.BrakeChange{To: recorded, From: []driver.BrakeState{driver.BrakeHalfOpen}, OwnerCheck: true, Owner: "w2", Now: now}) {
		t.Fatal("another owner recorded the probe task")
	}
	if !e.changeBrake(driver.BrakeChange{To: recorded, From: []driver.BrakeState{driver.BrakeHalfOpen}, OwnerCheck: true, Owner: "w1", Now: now}) {
		t.Fatal("the probe's owner could not record its task")
	}
	got = e.brakes()["dt.flaky"]
	if got.State != driver.BrakeHalfOpen || got.ProbeOwner != "w1" || got.ProbeTaskID != 42 || got.ProbeAttempt != 3 ||
		!got.ProbeAt.Equal(taken.ProbeAt) {
		t.Fatalf("half-open brake with its probe reads %+v", got)
	}
	closedAt := now.Add(time.Minute)
	closed := driver.BrakeRow{Type: "dt.flaky", State: driver.BrakeClosed, OpenedAt: got.OpenedAt, ClosedAt: closedAt, Reason: "probe succeeded"}
	closeIt := driver.BrakeChange{To: closed, From: []driver.BrakeState{driver.BrakeOpen, driver.BrakeHalfOpen}, Now: closedAt}
	if !e.changeBrake(closeIt) {
		t.Fatal("close did not apply")
	}
	if e.changeBrake(closeIt) {
		t.Fatal("closing a closed brake applied")
	}
	got = e.brakes()["dt.flaky"]
	if got.State != driver.BrakeClosed || !got.ClosedAt.Equal(closedAt) || got.ProbeOwner != "" || got.ProbeTaskID != 0 || !got.ProbeAt.IsZero() {
		t.Fatalf("closed brake reads %+v", got)
	}
	// Bad input is refused and writes nothing.
	for name, c := range map[string]driver.BrakeChange{
		"no type":       {To: driver.BrakeRow{State: driver.BrakeOpen}, From: []driver.BrakeState{driver.BrakeClosed}},
		"bad state":     {To: driver.BrakeRow{Type: "dt.x", State: "stuck"}, From: []driver.BrakeState{driver.BrakeClosed}},
		"no from":       {To: driver.BrakeRow{Type: "dt.x", State: driver.BrakeOpen}},
		"bad from":      {To: driver.BrakeRow{Type: "dt.x", State: driver.BrakeOpen}, From: []driver.BrakeState{"x"}},
		"ratio over 1":  {To: driver.BrakeRow{Type: "dt.x", State: driver.BrakeOpen, Ratio: 2}, From: []driver.BrakeState{driver.BrakeClosed}},
		"negative runs": {To: driver.BrakeRow{Type: "dt.x", State: driver.BrakeOpen, Attempts: -1}, From: []driver.BrakeState{driver.BrakeClosed}},
	} {
		if _, err := b.ChangeBrake(e.ctx, c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if rows := e.brakes(); len(rows) != 1 {
		t.Fatalf("bad input wrote brakes: %+v", rows)
	}
}

// testBrakeProbeOnce: of many concurrent takers of a half-open brake's
// probe, exactly one gets it.
func testBrakeProbeOnce(t *testing.T, e *env) {
	now := e.clock.Now()
	half := driver.BrakeRow{Type: "dt.flaky", State: driver.BrakeHalfOpen, OpenedAt: now, Until: now}
	if !e.changeBrake(driver.BrakeChange{To: half, From: []driver.BrakeState{driver.BrakeClosed}, Now: now}) {
		t.Fatal("half-open from closed did not apply")
	}
	const takers = 8
	var wg sync.WaitGroup
	won := make(chan string, takers)
	for i := range takers {
		wg.Go(func() {
			to := half
			to.ProbeOwner, to.ProbeAt = fmt.Sprintf("w%d", i), now
			ok, err := e.braker().ChangeBrake(e.ctx, driver.BrakeChange{To: to, From: []driver.BrakeState{driver.BrakeHalfOpen},
				OwnerCheck: true, Now: now})
			if err != nil {
				t.Error(err)
			}
			if ok {
				won <- to.ProbeOwner
			}
		})
	}
	wg.Wait()
	close(won)
	var winners []string
	for w := range won {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("probe taken by %v, want exactly one taker", winners)
	}
	if got := e.brakes()["dt.flaky"]; got.ProbeOwner != winners[0] {
		t.Fatalf("stored probe owner %q, winner %q", got.ProbeOwner, winners[0])
	}
}

// testBrakeConfig: runtime thresholds are stored on the brake's row (a
// closed one is made when none exists), survive state changes, and bad
// ones are refused, writing nothing.
func testBrakeConfig(t *testing.T, e *env) {
	b := e.braker()
	now := e.clock.Now()
	cfg := driver.BrakeConfig{Window: 5, Threshold: 0.25, Cooldown: 1500 * time.Millisecond}
	if err := b.SetBrakeConfig(e.ctx, driver.BrakeConfigParams{Type: "dt.flaky", Config: cfg, Now: now}); err != nil {
		t.Fatal(err)
	}
	got := e.brakes()["dt.flaky"]
	if got.State != driver.BrakeClosed || got.Config != cfg {
		t.Fatalf("brake after setting its config: %+v", got)
	}
	open := driver.BrakeRow{Type: "dt.flaky", State: driver.BrakeOpen, OpenedAt: now, Until: now.Add(time.Minute)}
	if !e.changeBrake(driver.BrakeChange{To: open, From: []driver.BrakeState{driver.BrakeClosed}, Now: now}) {
		t.Fatal("open did not apply")
	}
	if got := e.brakes()["dt.flaky"]; got.State != driver.BrakeOpen || got.Config != cfg {
		t.Fatalf("a state change lost the config: %+v", got)
	}
	off := driver.BrakeConfig{Window: -1}
	if err := b.SetBrakeConfig(e.ctx, driver.BrakeConfigParams{Type: "dt.flaky", Config: off, Now: now}); err != nil {
		t.Fatal(err)
	}
	if got := e.brakes()["dt.flaky"]; got.State != driver.BrakeOpen || got.Config != off {
		t.Fatalf("after turning the brake off: %+v", got)
	}
	for name, c := range map[string]driver.BrakeConfigParams{
		"no type":        {Config: cfg},
		"window":         {Type: "dt.x", Config: driver.BrakeConfig{Window: -2}},
		"threshold":      {Type: "dt.x", Config: driver.BrakeConfig{Threshold: 1.5}},
		"cooldown":       {Type: "dt.x", Config: driver.BrakeConfig{Cooldown: -time.Second}},
		"cooldown large": {Type: "dt.x", Config: driver.BrakeConfig{Cooldown: 25 * time.Hour}},
	} {
		if err := b.SetBrakeConfig(e.ctx, c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if rows := e.brakes(); len(rows) != 1 {
		t.Fatalf("bad input wrote brakes: %+v", rows)
	}
}
