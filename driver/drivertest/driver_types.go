package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// The declared type defaults (keel_types), the claim's type filter and the
// snooze counter.

// testDeclareTypes: DeclareTypes replaces a type's row whole (the last
// writer wins), ListTypes reads all or the named ones by name, and bad
// input writes nothing.
func testDeclareTypes(t *testing.T, e *env) {
	now := e.clock.Now()
	list := func(names []string) []driver.TypeDefaults {
		t.Helper()
		got, err := e.drv.ListTypes(e.ctx, names)
		if err != nil {
			t.Fatalf("list types %v: %v", names, err)
		}
		return got
	}
	if got := list(nil); len(got) != 0 {
		t.Fatalf("empty table lists %+v", got)
	}
	zero := 0
	a := driver.TypeDefaults{Name: "a.mail", Queue: "q2", Priority: &zero, MaxAttempts: 7, Timeout: 90 * time.Second,
		BackoffBase: time.Second, BackoffMax: time.Minute}
	b := driver.TypeDefaults{Name: "b.bare", Timeout: 500 * time.Microsecond} // below 1ms: stored as 1ms
	if err := e.drv.DeclareTypes(e.ctx, driver.DeclareTypesParams{Types: []driver.TypeDefaults{b, a}, Now: now}); err != nil {
		t.Fatal(err)
	}
	got := list(nil)
	if len(got) != 2 || !got[0].Equal(a) || !got[1].Equal(b) || got[1].Timeout != time.Millisecond {
		t.Fatalf("listed %+v, want a.mail then b.bare", got)
	}
	if got[0].Priority == nil || *got[0].Priority != 0 || got[1].Priority != nil || got[1].Queue != "" {
		t.Fatalf("priority 0 must stay set and an unset one unset: %+v", got)
	}
	if got[0].UpdatedAt.IsZero() {
		t.Fatal("updated_at not set")
	}
	// Another declaration replaces the row whole.
	five := 5
	a2 := driver.TypeDefaults{Name: "a.mail", Priority: &five}
	if err := e.drv.DeclareTypes(e.ctx, driver.DeclareTypesParams{Types: []driver.TypeDefaults{a2}, Now: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	got = list([]string{"a.mail", "not.stored"})
	if len(got) != 1 || !got[0].Equal(a2) || got[0].Queue != "" || got[0].MaxAttempts != 0 {
		t.Fatalf("after redeclaring: %+v, want %+v", got, a2)
	}
	if got := list([]string{}); len(got) != 0 {
		t.Fatalf("no names listed %+v", got)
	}
	// Bad input writes nothing.
	for name, p := range map[string]driver.DeclareTypesParams{
		"empty name": {Types: []driver.TypeDefaults{{Name: "c"}, {Name: ""}}},
		"twice":      {Types: []driver.TypeDefaults{{Name: "c"}, {Name: "c", MaxAttempts: 2}}},
		"negative":   {Types: []driver.TypeDefaults{{Name: "c"}, {Name: "d", MaxAttempts: -1}}},
	} {
		p.Now = now
		if err := e.drv.DeclareTypes(e.ctx, p); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	if got := list(nil); len(got) != 2 {
		t.Fatalf("bad declarations wrote rows: %+v", got)
	}
}

// testClaimTypes: a claim with Types takes only those types, with or
// without ExcludeTypes; an empty list takes nothing; nil takes any type.
func testClaimTypes(t *testing.T, e *env) {
	now := e.clock.Now()
	x := e.insert(func(p *driver.InsertParams) { p.Type, p.Priority = "x", 10 })
	y := e.insert(func(p *driver.InsertParams) { p.Type = "y" })
	z := e.insert(func(p *driver.InsertParams) { p.Type, p.Priority = "z", 5 })
	claim := func(limit int, types []string, exclude ...string) []int64 {
		t.Helper()
		rows, err := e.drv.Claim(e.ctx, driver.ClaimParams{Queue: "default", Limit: limit, Types: types, ExcludeTypes: exclude,
			Owner: "w", Now: now, LeaseExpiresAt: now.Add(leaseTTL)})
		if err != nil {
			t.Fatalf("claim types %v excluding %v: %v", types, exclude, err)
		}
		for _, r := range rows {
			if r.State != driver.StateRunning || r.Attempt != 1 {
				t.Fatalf("claimed row %+v", r)
			}
		}
		return ids(rows)
	}
	if got := claim(10, []string{}); len(got) != 0 {
		t.Fatalf("claim of no types took %v", got)
	}
	if got := claim(10, []string{"other"}); len(got) != 0 {
		t.Fatalf("claim of another type took %v", got)
	}
	if got := claim(10, []string{"x", "y"}, "x"); !slices.Equal(got, []int64{y.ID}) {
		t.Fatalf("claim of x, y excluding x took %v, want [%d]", got, y.ID)
	}
	if r := e.get(x.ID); r.State != driver.StatePending || r.Attempt != 0 || r.Fence != 0 {
		t.Fatalf("excluded task changed: %+v", r)
	}
	if got := claim(1, []string{"z", "x"}); !slices.Equal(got, []int64{x.ID}) {
		t.Fatalf("claim of z, x limit 1 took %v, want [%d] (best first)", got, x.ID)
	}
	if got := claim(10, nil); !slices.Equal(got, []int64{z.ID}) {
		t.Fatalf("claim of any type took %v, want [%d]", got, z.ID)
	}
}

// testSnoozeCounter: a snooze transition counts one more snooze (Claim
// and Get return the count), other transitions leave it, and Retry and
// RetryMatching reset it with the attempts.
func testSnoozeCounter(t *testing.T, e *env) {
	task := e.insert()
	other := e.insert(func(p *driver.InsertParams) { p.Type = "dt.other" })
	now := e.clock.Now()
	snooze := func(id int64, n int) {
		t.Helper()
		for i := range n {
			row := e.claimTask(id, now)
			if row.Snoozes != i {
				t.Fatalf("claim %d: snoozes %d, want %d", i+1, row.Snoozes, i)
			}
			if got := e.finish("w", now, driver.Transition{ID: id, Fence: row.Fence, State: driver.StatePending,
				RunAt: now, Refund: true, Snooze: true}); len(got) != 1 {
				t.Fatalf("snooze %d not applied", i+1)
			}
		}
	}
	snooze(task.ID, 3)
	if r := e.get(task.ID); r.Snoozes != 3 || r.Attempt != 0 || r.State != driver.StatePending {
		t.Fatalf("after 3 snoozes: snoozes %d attempt %d state %s", r.Snoozes, r.Attempt, r.State)
	}
	// A release (refund without snooze) and a death keep the count.
	r := e.claimTask(task.ID, now)
	e.finish("w", now, driver.Transition{ID: task.ID, Fence: r.Fence, State: driver.StatePending, RunAt: now, Refund: true})
	r = e.claimTask(task.ID, now)
	e.finish("w", now, driver.Transition{ID: task.ID, Fence: r.Fence, State: driver.StateDead,
		Error: &driver.AttemptError{Attempt: 1, Node: "w", Start: now, End: now, Outcome: driver.OutcomeSnoozed, Error: "x"}})
	if r := e.get(task.ID); r.Snoozes != 3 || r.State != driver.StateDead || r.Errors[0].Outcome != driver.OutcomeSnoozed {
		t.Fatalf("dead: snoozes %d state %s errors %+v", r.Snoozes, r.State, r.Errors)
	}
	retried, err := e.drv.Retry(e.ctx, task.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if retried.Snoozes != 0 || retried.Attempt != 0 {
		t.Fatalf("Retry returned snoozes %d attempt %d, want 0 and 0", retried.Snoozes, retried.Attempt)
	}
	if r := e.get(task.ID); r.Snoozes != 0 {
		t.Fatalf("Retry kept snoozes %d", r.Snoozes)
	}
	// RetryMatching resets it too.
	snooze(other.ID, 2)
	r = e.claimTask(other.ID, now)
	e.finish("w", now, driver.Transition{ID: other.ID, Fence: r.Fence, State: driver.StateDead,
		Error: &driver.AttemptError{Attempt: 1, Node: "w", Start: now, End: now, Outcome: driver.OutcomeError, Error: "x"}})
	if n, err := e.drv.RetryMatching(e.ctx, driver.Filter{State: driver.StateDead, Type: "dt.other", Limit: 10}, now); err != nil || n != 1 {
		t.Fatalf("RetryMatching: %d, %v", n, err)
	}
	if r := e.get(other.ID); r.Snoozes != 0 || r.State != driver.StatePending {
		t.Fatalf("RetryMatching left snoozes %d state %s", r.Snoozes, r.State)
	}
}

// claimTask claims the one task id as owner "w" (only its type, so
// the test's other task stays put) and returns it.
func (e *env) claimTask(id int64, now time.Time) driver.TaskRow {
	e.t.Helper()
	task := e.get(id)
	rows, err := e.drv.Claim(e.ctx, driver.ClaimParams{Queue: task.Queue, Limit: 1, Types: []string{task.Type},
		Owner: "w", Now: now, LeaseExpiresAt: now.Add(leaseTTL)})
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	if len(rows) != 1 || rows[0].ID != id {
		e.t.Fatalf("claimed %v, want task %d", ids(rows), id)
	}
	return rows[0]
}
