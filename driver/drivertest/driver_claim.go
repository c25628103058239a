package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func testInsertAndGet(t *testing.T, e *env) {
	now := e.clock.Now()
	row := e.insert(func(p *driver.InsertParams) {
		p.Queue, p.Type, p.Priority = "mail", "dt.email", 7
		p.Payload = []byte(`{"to":"a@example.com","n":[1,2]}`)
		p.MaxAttempts, p.RunAt, p.Timeout = 5, now.Add(time.Minute), 90*time.Second
		p.IdemKey, p.PayloadDigest, p.Meta = "k:one", "d1", []byte(`{"tenant":"x"}`)
	})
	got := e.get(row.ID)
	for _, r := range []*driver.TaskRow{row, got} {
		switch {
		case r.ID != row.ID || r.Queue != "mail" || r.Type != "dt.email" || r.Priority != 7:
			t.Fatalf("identity: %+v", r)
		case !jsonEqual(r.Payload, []byte(`{"n":[1,2],"to":"a@example.com"}`)):
			t.Fatalf("payload %s", r.Payload)
		case r.State != driver.StatePending || r.Attempt != 0 || r.MaxAttempts != 5:
			t.Fatalf("state %s attempt %d/%d", r.State, r.Attempt, r.MaxAttempts)
		case !r.RunAt.Equal(now.Add(time.Minute)) || r.Timeout != 90*time.Second:
			t.Fatalf("run_at %v timeout %v", r.RunAt, r.Timeout)
		case r.IdemKey != "k:one" || r.PayloadDigest != "d1" || !jsonEqual(r.Meta, []byte(`{"tenant":"x"}`)):
			t.Fatalf("key %q digest %q meta %s", r.IdemKey, r.PayloadDigest, r.Meta)
		case !r.CreatedAt.Equal(now) || !r.UpdatedAt.Equal(now):
			t.Fatalf("created %v updated %v, want %v", r.CreatedAt, r.UpdatedAt, now)
		case !r.StartedAt.IsZero() || !r.AttemptedAt.IsZero() || !r.FinishedAt.IsZero():
			t.Fatalf("times set before any run: %+v", r)
		case r.LeaseOwner != "" || !r.LeaseExpiresAt.IsZero() || len(r.Errors) != 0 || r.Result != nil:
			t.Fatalf("lease, errors or result set on a new task: %+v", r)
		}
	}
	// What Insert returns is the stored row, to the database's precision:
	// a driver may build it from the parameters instead of reading it.
	odd := e.insert(func(p *driver.InsertParams) {
		p.RunAt, p.Timeout = now.Add(time.Minute+1234*time.Nanosecond), 1500*time.Microsecond
		p.Meta = []byte(`{}`)
	})
	back := e.get(odd.ID)
	switch {
	case !odd.RunAt.Equal(back.RunAt) || odd.Timeout != back.Timeout:
		t.Fatalf("inserted run_at %v timeout %v, stored %v %v", odd.RunAt, odd.Timeout, back.RunAt, back.Timeout)
	case !odd.CreatedAt.Equal(back.CreatedAt) || !odd.UpdatedAt.Equal(back.UpdatedAt):
		t.Fatalf("inserted created %v updated %v, stored %v %v", odd.CreatedAt, odd.UpdatedAt, back.CreatedAt, back.UpdatedAt)
	case odd.Fence != back.Fence || odd.Snoozes != back.Snoozes || len(odd.Steps) != len(back.Steps) || odd.State != back.State:
		t.Fatalf("inserted %+v, stored %+v", odd, back)
	case !jsonEqual(odd.Meta, back.Meta) || !jsonEqual(odd.Payload, back.Payload) || odd.PayloadDigest != back.PayloadDigest:
		t.Fatalf("inserted payload %s meta %s, stored %s %s", odd.Payload, odd.Meta, back.Payload, back.Meta)
	}
	second := e.insert()
	if second.ID <= row.ID {
		t.Fatalf("ids not increasing: %d then %d", row.ID, second.ID)
	}
	if second.IdemKey != "" || second.Meta != nil {
		t.Fatalf("empty key and meta stored as %q, %s", second.IdemKey, second.Meta)
	}
	if _, err := e.drv.Get(e.ctx, second.ID+1000); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
}

// orderFixture inserts tasks into queue whose claim order is known and
// returns them in that order, with one future task and one of another queue.
func orderFixture(e *env, queue string) (want []int64, future, other int64) {
	now := e.clock.Now()
	at := func(prio int, runAt time.Duration) func(*driver.InsertParams) {
		return func(p *driver.InsertParams) { p.Queue, p.Priority, p.RunAt = queue, prio, now.Add(runAt) }
	}
	a := e.insert(at(0, -3*time.Second))
	b := e.insert(at(5, -1*time.Second))
	c := e.insert(at(5, -2*time.Second))
	d := e.insert(at(5, -2*time.Second))
	x := e.insert(at(-1, -10*time.Second))
	f := e.insert(at(10, time.Second))
	g := e.insert(at(100, -time.Hour), func(p *driver.InsertParams) { p.Queue = queue + "-other" })
	return []int64{c.ID, d.ID, b.ID, a.ID, x.ID}, f.ID, g.ID
}

func testClaimOrder(t *testing.T, e *env) {
	want, future, other := orderFixture(e, "default")
	now := e.clock.Now()
	var got []int64
	for range want {
		got = append(got, e.claimOne("w1", now).ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v (priority DESC, run_at ASC, id ASC)", got, want)
	}
	if rows := e.claim("w1", now, 10); len(rows) != 0 {
		t.Fatalf("claimed %v: future and other-queue tasks must wait", ids(rows))
	}
	if r := e.claimOne("w1", now.Add(time.Second)); r.ID != future {
		t.Fatalf("claimed %d at its run_at, want %d", r.ID, future)
	}
	if rows := e.claimQueue("default-other", "w1", now, 10); len(rows) != 1 || rows[0].ID != other {
		t.Fatalf("claim other queue: %v, want [%d]", ids(rows), other)
	}
}

func testClaimBatchOrder(t *testing.T, e *env) {
	want, _, _ := orderFixture(e, "default")
	if got := ids(e.claim("w1", e.clock.Now(), 100)); !slices.Equal(got, want) {
		t.Fatalf("batch claim %v, want %v", got, want)
	}
	// A limit takes the best tasks, not any tasks.
	want, _, _ = orderFixture(e, "limited")
	if got := ids(e.claimQueue("limited", "w1", e.clock.Now(), 3)); !slices.Equal(got, want[:3]) {
		t.Fatalf("claim limit 3: %v, want %v", got, want[:3])
	}
}

func testClaimNotBeforeRunAt(t *testing.T, e *env) {
	now := e.clock.Now()
	runAt := now.Add(10 * time.Second)
	row := e.insert(func(p *driver.InsertParams) { p.RunAt = runAt })
	if rows := e.claim("w1", runAt.Add(-time.Microsecond), 10); len(rows) != 0 {
		t.Fatalf("claimed a task 1µs before its run_at")
	}
	if got := e.claimOne("w1", runAt); got.ID != row.ID {
		t.Fatalf("claimed %d at run_at, want %d", got.ID, row.ID)
	}
}

// testClaimMarksRunning checks the stored row after a claim in full, and
// in the returned row the fields the engine runs a task from: a driver may
// return a narrow row (StartedAt, UpdatedAt, IdemKey, Errors, Meta may be
// left zero), but never a wrong one.
func testClaimMarksRunning(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.Queue, p.Priority, p.Timeout = "default", 3, 42*time.Second })
	now := e.clock.Advance(time.Second)
	got := e.claimOne("w1", now)
	switch r := got; {
	case r.ID != row.ID || r.State != driver.StateRunning || r.Attempt != 1 || r.Queue != "default":
		t.Fatalf("claimed %d queue %q state %s attempt %d", r.ID, r.Queue, r.State, r.Attempt)
	case r.LeaseOwner != "w1" || !r.LeaseExpiresAt.Equal(now.Add(leaseTTL)) || !r.AttemptedAt.Equal(now):
		t.Fatalf("claimed row: lease %q until %v attempted %v", r.LeaseOwner, r.LeaseExpiresAt, r.AttemptedAt)
	case !jsonEqual(r.Payload, row.Payload) || r.Type != row.Type || r.MaxAttempts != row.MaxAttempts ||
		r.Priority != 3 || r.Timeout != 42*time.Second || !r.RunAt.Equal(row.RunAt) || !r.CreatedAt.Equal(row.CreatedAt):
		t.Fatalf("claimed row lost fields: %+v", r)
	}
	switch r := e.get(row.ID); {
	case r.State != driver.StateRunning || r.Attempt != 1:
		t.Fatalf("stored: state %s attempt %d", r.State, r.Attempt)
	case r.LeaseOwner != "w1" || !r.LeaseExpiresAt.Equal(now.Add(leaseTTL)):
		t.Fatalf("stored lease %q until %v", r.LeaseOwner, r.LeaseExpiresAt)
	case !r.StartedAt.Equal(now) || !r.AttemptedAt.Equal(now) || !r.UpdatedAt.Equal(now):
		t.Fatalf("stored: started %v attempted %v updated %v, want %v", r.StartedAt, r.AttemptedAt, r.UpdatedAt, now)
	}
	if rows := e.claim("w2", now, 10); len(rows) != 0 {
		t.Fatalf("a running task was claimed again: %v", ids(rows))
	}
}

func testListAndCounts(t *testing.T, e *env) {
	var all []int64
	for i := range 6 {
		q, typ := "q1", "dt.a"
		if i%2 == 1 {
			q = "q2"
		}
		if i >= 4 {
			typ = "dt.b"
		}
		all = append(all, e.insert(func(p *driver.InsertParams) { p.Queue, p.Type = q, typ }).ID)
	}
	now := e.clock.Now()
	e.claimQueue("q1", "w", now, 1) // all[0] running
	slices.Reverse(all)
	list := func(p driver.Filter) []int64 {
		t.Helper()
		rows, err := e.drv.List(e.ctx, p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		return ids(rows)
	}
	if got := list(driver.Filter{}); !slices.Equal(got, all) {
		t.Fatalf("list all: %v, want %v (id descending)", got, all)
	}
	if got := list(driver.Filter{Queue: "q2"}); !slices.Equal(got, []int64{all[0], all[2], all[4]}) {
		t.Fatalf("list q2: %v", got)
	}
	if got := list(driver.Filter{Type: "dt.b"}); !slices.Equal(got, all[:2]) {
		t.Fatalf("list dt.b: %v", got)
	}
	if got := list(driver.Filter{State: driver.StateRunning}); !slices.Equal(got, []int64{all[5]}) {
		t.Fatalf("list running: %v", got)
	}
	if got := list(driver.Filter{Queue: "q1", Type: "dt.a", State: driver.StatePending}); !slices.Equal(got, []int64{all[3]}) {
		t.Fatalf("list q1/dt.a/pending: %v", got)
	}
	if got := list(driver.Filter{Limit: 2}); !slices.Equal(got, all[:2]) {
		t.Fatalf("list limit 2: %v", got)
	}
	if got := list(driver.Filter{BeforeID: all[1], Limit: 2}); !slices.Equal(got, all[2:4]) {
		t.Fatalf("list page 2: %v", got)
	}
	counts, err := e.drv.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range byState(counts) {
		got[c.Queue+"/"+string(c.State)] += c.Count
	}
	want := map[string]int64{"q1/running": 1, "q1/pending": 2, "q2/pending": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

func testLeadership(t *testing.T, e *env) {
	lead := func(owner string, now time.Time) bool {
		t.Helper()
		ok, err := e.drv.Lead(e.ctx, driver.LeadParams{Name: "m", Owner: owner, Now: now, TTL: 10 * time.Second})
		if err != nil {
			t.Fatalf("lead %s: %v", owner, err)
		}
		return ok
	}
	t0 := e.clock.Now()
	if !lead("A", t0) {
		t.Fatal("A could not take a free leadership")
	}
	if lead("B", t0.Add(time.Second)) {
		t.Fatal("B took a held leadership")
	}
	if !lead("A", t0.Add(5*time.Second)) { // renews until t0+15s
		t.Fatal("A could not renew")
	}
	if lead("B", t0.Add(14*time.Second)) {
		t.Fatal("B took the leadership before the renewed lease expired")
	}
	if ok, _ := e.drv.Lead(e.ctx, driver.LeadParams{Name: "other", Owner: "B", Now: t0, TTL: time.Second}); !ok {
		t.Fatal("leaderships of different names must be independent")
	}
	if !lead("B", t0.Add(16*time.Second)) {
		t.Fatal("B could not take an expired leadership")
	}
	if lead("A", t0.Add(17*time.Second)) {
		t.Fatal("A kept leading after B took over")
	}
	if err := e.drv.Resign(e.ctx, "m", "A"); err != nil { // not A's: no effect
		t.Fatal(err)
	}
	if lead("A", t0.Add(18*time.Second)) {
		t.Fatal("a non-owner's Resign released the leadership")
	}
	if err := e.drv.Resign(e.ctx, "m", "B"); err != nil {
		t.Fatal(err)
	}
	if !lead("A", t0.Add(19*time.Second)) {
		t.Fatal("A could not lead after B resigned")
	}
}

// testClaimedReadBack: Claimed reads back, as Claim returned them, the
// tasks of a queue running under an owner with a live lease: not another
// owner's, not another queue's, not finished ones, not expired leases.
func testClaimedReadBack(t *testing.T, e *env) {
	for range 3 {
		e.insert()
	}
	other := e.insert(func(p *driver.InsertParams) { p.Queue = "other" })
	t0 := e.clock.Now()
	mine := e.claim("w1", t0, 2)
	theirs := e.claim("w2", t0, 1)
	e.claimQueue("other", "w1", t0, 1)
	if len(mine) != 2 || len(theirs) != 1 {
		t.Fatalf("claimed %d and %d, want 2 and 1", len(mine), len(theirs))
	}
	read := func(owner, queue string, now time.Time) []driver.TaskRow {
		t.Helper()
		rows, err := e.drv.Claimed(e.ctx, driver.ClaimedParams{Queue: queue, Owner: owner, Now: now, Limit: 100})
		if err != nil {
			t.Fatalf("claimed: %v", err)
		}
		return rows
	}
	got := read("w1", "default", t0.Add(time.Second))
	if len(got) != 2 {
		t.Fatalf("read back %v, want %v", ids(got), ids(mine))
	}
	for i := range got {
		g, w := got[i], mine[i]
		if g.ID != w.ID || g.Fence != w.Fence || g.Attempt != w.Attempt || g.State != driver.StateRunning ||
			g.LeaseOwner != "w1" || !g.LeaseExpiresAt.Equal(w.LeaseExpiresAt) || !g.AttemptedAt.Equal(w.AttemptedAt) ||
			g.Type != w.Type || g.Queue != w.Queue || g.Timeout != w.Timeout || !jsonEqual(g.Payload, w.Payload) {
			t.Fatalf("read back\n%+v\nclaimed\n%+v", g, w)
		}
	}
	if rows := read("w1", "other", t0); len(rows) != 1 || rows[0].ID != other.ID {
		t.Fatalf("queue other: %v, want [%d]", ids(rows), other.ID)
	}
	e.finish("w1", t0, driver.Transition{ID: mine[0].ID, Fence: mine[0].Fence, State: driver.StateSucceeded})
	if rows := read("w1", "default", t0); len(rows) != 1 || rows[0].ID != mine[1].ID {
		t.Fatalf("after a finish: %v, want [%d]", ids(rows), mine[1].ID)
	}
	if rows := read("w1", "default", t0.Add(leaseTTL+time.Second)); len(rows) != 0 {
		t.Fatalf("expired leases read back: %v", ids(rows))
	}
}
