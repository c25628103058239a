package drivertest

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Cluster-wide limits: ClaimLimited.

// claimLimited runs one limited claim of up to n tasks of typ (nil: any
// type) in the default queue under limits.
func (e *env) claimLimited(owner string, now time.Time, n int, types []string, limits ...driver.Limit) driver.LimitedClaim {
	e.t.Helper()
	res, err := e.drv.ClaimLimited(e.ctx, driver.LimitedClaimParams{
		ClaimParams: driver.ClaimParams{Queue: "default", Limit: n, Owner: owner, Now: now,
			LeaseExpiresAt: now.Add(leaseTTL), Types: types},
		Limits: limits,
	})
	if err != nil {
		e.t.Fatalf("limited claim: %v", err)
	}
	return res
}

func typeLimit(name string) driver.Limit  { return driver.Limit{Kind: driver.SettingType, Name: name} }
func queueLimit(name string) driver.Limit { return driver.Limit{Kind: driver.SettingQueue, Name: name} }

// testClaimLimitedConcurrency: a type's concurrency caps its running tasks
// whoever claims them; a finish frees room; other types are not counted.
func testClaimLimitedConcurrency(t *testing.T, e *env) {
	for range 5 {
		e.insert(func(p *driver.InsertParams) { p.Type = "lim.a" })
	}
	e.insert(func(p *driver.InsertParams) { p.Type = "lim.b" })
	// No setting row: nothing limits.
	now := e.clock.Now()
	e.patch(driver.SettingPatch{Kind: driver.SettingType, Name: "lim.a", Concurrency: ptr(2)}, driver.Setting{Concurrency: 2})
	// lim.b runs outside the limit: it does not count against lim.a.
	if got := e.claimLimited("other", now, 1, []string{"lim.b"}, typeLimit("lim.b")); len(got.Rows) != 1 || got.Full {
		t.Fatalf("unlimited type: got %d rows, full %v; want 1, false", len(got.Rows), got.Full)
	}
	now = e.clock.Now()
	first := e.claimLimited("n1", now, 10, []string{"lim.a"}, typeLimit("lim.a"))
	if len(first.Rows) != 2 || !first.Full || first.TokenIn != 0 {
		t.Fatalf("first claim: %d rows, full %v, token in %v; want 2, true, 0", len(first.Rows), first.Full, first.TokenIn)
	}
	if got := e.claimLimited("n2", now, 10, []string{"lim.a"}, typeLimit("lim.a")); len(got.Rows) != 0 || !got.Full {
		t.Fatalf("claim at the limit: %d rows, full %v; want 0, true", len(got.Rows), got.Full)
	}
	e.finish("n1", now, driver.Transition{ID: first.Rows[0].ID, Fence: first.Rows[0].Fence, State: driver.StateSucceeded})
	if got := e.claimLimited("n2", now, 10, []string{"lim.a"}, typeLimit("lim.a")); len(got.Rows) != 1 {
		t.Fatalf("claim after a finish: %d rows, want 1", len(got.Rows))
	}
	// A queue limit of 3 with the type's 2: the queue has 3 running now
	// (2 of lim.a and lim.b), so nothing more of any type.
	e.insert(func(p *driver.InsertParams) { p.Type = "lim.c" })
	e.patch(driver.SettingPatch{Kind: driver.SettingQueue, Name: "default", Concurrency: ptr(3)}, driver.Setting{Concurrency: 3})
	if got := e.claimLimited("n3", now, 10, []string{"lim.c"}, queueLimit("default")); len(got.Rows) != 0 || !got.Full {
		t.Fatalf("claim at the queue's limit: %d rows, full %v; want 0, true", len(got.Rows), got.Full)
	}
	e.patch(driver.SettingPatch{Kind: driver.SettingQueue, Name: "default", Concurrency: ptr(0)}, driver.Setting{})
	if got := e.claimLimited("n3", now, 10, []string{"lim.c"}, queueLimit("default")); len(got.Rows) != 1 {
		t.Fatalf("claim once the queue's limit is cleared: %d rows, want 1", len(got.Rows))
	}
}

// testClaimLimitedConcurrent: 8 claimers racing for a type limited to 3
// never hold more than 3 running tasks between them.
func testClaimLimitedConcurrent(t *testing.T, e *env) {
	ps := make([]driver.InsertParams, 40)
	for i := range ps {
		ps[i] = e.params(func(p *driver.InsertParams) { p.Type = "lim.race" })
	}
	if _, err := e.drv.Insert(e.ctx, ps); err != nil {
		t.Fatal(err)
	}
	e.patch(driver.SettingPatch{Kind: driver.SettingType, Name: "lim.race", Concurrency: ptr(3)}, driver.Setting{Concurrency: 3})
	now := e.clock.Now()
	var mu sync.Mutex
	running := map[int64]driver.TaskRow{}
	maxRunning, finished := 0, 0
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := "racer" + string(rune('a'+w))
			for {
				mu.Lock()
				done := finished == len(ps)
				mu.Unlock()
				if done {
					return
				}
				res, err := e.drv.ClaimLimited(e.ctx, driver.LimitedClaimParams{
					ClaimParams: driver.ClaimParams{Queue: "default", Limit: 2, Owner: owner, Now: now,
						LeaseExpiresAt: now.Add(leaseTTL), Types: []string{"lim.race"}},
					Limits: []driver.Limit{typeLimit("lim.race")},
				})
				if err != nil {
					t.Errorf("limited claim: %v", err)
					return
				}
				mu.Lock()
				for _, r := range res.Rows {
					running[r.ID] = r
				}
				maxRunning = max(maxRunning, len(running))
				mu.Unlock()
				for _, r := range res.Rows {
					// Off the books before the database frees its room.
					mu.Lock()
					delete(running, r.ID)
					mu.Unlock()
					if _, err := e.drv.Finish(e.ctx, driver.FinishParams{Owner: owner, Now: now, Transitions: []driver.Transition{
						{ID: r.ID, Fence: r.Fence, State: driver.StateSucceeded}}}); err != nil {
						t.Errorf("finish: %v", err)
						return
					}
					mu.Lock()
					finished++
					mu.Unlock()
				}
				if len(res.Rows) == 0 {
					time.Sleep(time.Millisecond) // yield to the others
				}
			}
		}()
	}
	wg.Wait()
	if maxRunning > 3 {
		t.Fatalf("at most %d tasks ran at once, limit 3", maxRunning)
	}
	if finished != len(ps) {
		t.Fatalf("finished %d tasks, want %d", finished, len(ps))
	}
}

// testClaimLimitedRate: the token bucket starts full (burst), refills at
// the rate and says when its next token comes.
func testClaimLimitedRate(t *testing.T, e *env) {
	for range 20 {
		e.insert(func(p *driver.InsertParams) { p.Type = "lim.rate" })
	}
	e.patch(driver.SettingPatch{Kind: driver.SettingType, Name: "lim.rate", Rate: ptr(2.0), Burst: ptr(3)},
		driver.Setting{Rate: 2, Burst: 3})
	now := e.clock.Now()
	got := e.claimLimited("n1", now, 10, nil, typeLimit("lim.rate"))
	if len(got.Rows) != 3 || got.Full || got.TokenIn != 500*time.Millisecond {
		t.Fatalf("full bucket: %d rows, full %v, token in %v; want 3, false, 500ms", len(got.Rows), got.Full, got.TokenIn)
	}
	if got := e.claimLimited("n1", now, 10, nil, typeLimit("lim.rate")); len(got.Rows) != 0 || got.TokenIn != 500*time.Millisecond {
		t.Fatalf("empty bucket: %d rows, token in %v", len(got.Rows), got.TokenIn)
	}
	// 0.75 s later: 1.5 tokens, one task, the next token 0.25 s on.
	now = e.clock.Advance(750 * time.Millisecond)
	if got := e.claimLimited("n1", now, 10, nil, typeLimit("lim.rate")); len(got.Rows) != 1 || got.TokenIn != 250*time.Millisecond {
		t.Fatalf("after 0.75 s: %d rows, token in %v; want 1, 250ms", len(got.Rows), got.TokenIn)
	}
	// An hour later the bucket holds its burst, no more.
	now = e.clock.Advance(time.Hour)
	if got := e.claimLimited("n1", now, 10, nil, typeLimit("lim.rate")); len(got.Rows) != 3 {
		t.Fatalf("after an hour: %d rows, want the burst 3", len(got.Rows))
	}
	// A claim that asks for less than the tokens takes what it asks.
	now = e.clock.Advance(time.Hour)
	if got := e.claimLimited("n1", now, 2, nil, typeLimit("lim.rate")); len(got.Rows) != 2 || got.TokenIn != 0 {
		t.Fatalf("asking 2 of 3 tokens: %d rows, token in %v; want 2, 0", len(got.Rows), got.TokenIn)
	}
	if got := e.claimLimited("n1", now, 2, nil, typeLimit("lim.rate")); len(got.Rows) != 1 {
		t.Fatalf("the last token: %d rows, want 1", len(got.Rows))
	}
	// Changing the rate refills the bucket; the default burst is ceil(rate).
	e.patch(driver.SettingPatch{Kind: driver.SettingType, Name: "lim.rate", Rate: ptr(1.5), Burst: ptr(0)},
		driver.Setting{Rate: 1.5})
	if got := e.claimLimited("n1", now, 10, nil, typeLimit("lim.rate")); len(got.Rows) != 2 {
		t.Fatalf("after a new rate 1.5: %d rows, want the default burst 2", len(got.Rows))
	}
}

// testBucketMath checks the shared token bucket arithmetic.
func testBucketMath(t *testing.T, _ *env) {
	at := int64(1_000_000)
	s := driver.LimitState{Rate: 4, Burst: 2, Tokens: 0.5, TokensAt: &at}
	if got := s.Refill(at + 250_000); math.Abs(got-1.5) > 1e-9 {
		t.Fatalf("refill after 0.25 s at 4/s from 0.5: %v, want 1.5", got)
	}
	if got := s.Refill(at + 10_000_000); got != 2 {
		t.Fatalf("refill caps at the burst: %v, want 2", got)
	}
	if got := s.Refill(at - 10_000_000); got != 0.5 {
		t.Fatalf("a clock gone back adds nothing: %v, want 0.5", got)
	}
	if got := (driver.LimitState{Rate: 2.5}).Refill(at); got != 3 {
		t.Fatalf("a new bucket is full at ceil(rate): %v, want 3", got)
	}
	n, full, tokenAt := driver.PlanLimited([]driver.LimitState{s}, 5, at+250_000)
	if n != 1 || full || tokenAt != at+250_000+125_000 {
		t.Fatalf("plan: %d, %v, %d; want 1, false, %d", n, full, tokenAt, at+375_000)
	}
	n, full, _ = driver.PlanLimited([]driver.LimitState{{Concurrency: 4, Running: 3}, s}, 5, at+10_000_000)
	if n != 1 || !full {
		t.Fatalf("plan with room 1 and 2 tokens: %d, %v; want 1, true", n, full)
	}
	tokens, stamp := s.Spend(1, at+250_000)
	if math.Abs(tokens-0.5) > 1e-9 || stamp != at+250_000 {
		t.Fatalf("spend: %v at %d, want 0.5 at %d", tokens, stamp, at+250_000)
	}
}

// testClaimLimitedBadParams: bad limited claims and bad limit settings
// are refused and write nothing.
func testClaimLimitedBadParams(t *testing.T, e *env) {
	task := e.insert(func(p *driver.InsertParams) { p.Type = "lim.bad" })
	now := e.clock.Now()
	base := driver.ClaimParams{Queue: "default", Limit: 5, Owner: "n1", Now: now, LeaseExpiresAt: now.Add(leaseTTL)}
	for name, p := range map[string]driver.LimitedClaimParams{
		"no limit":     {ClaimParams: base},
		"bad kind":     {ClaimParams: base, Limits: []driver.Limit{{Kind: "node", Name: "x"}}},
		"empty name":   {ClaimParams: base, Limits: []driver.Limit{{Kind: driver.SettingType}}},
		"twice":        {ClaimParams: base, Limits: []driver.Limit{typeLimit("x"), typeLimit("x")}},
		"zero claimed": {ClaimParams: driver.ClaimParams{Queue: "default", Owner: "n1", Now: now}, Limits: []driver.Limit{typeLimit("x")}},
	} {
		if _, err := e.drv.ClaimLimited(e.ctx, p); err == nil {
			t.Errorf("%s: limited claim accepted", name)
		}
	}
	for name, p := range map[string]driver.SettingPatch{
		"negative concurrency": {Concurrency: ptr(-1)},
		"negative rate":        {Rate: ptr(-1.0)},
		"NaN rate":             {Rate: ptr(math.NaN())},
		"infinite rate":        {Rate: ptr(math.Inf(1))},
		"negative burst":       {Burst: ptr(-2)},
	} {
		p.Kind, p.Name, p.Now = driver.SettingType, "lim.bad", now
		if _, err := e.drv.PatchSetting(e.ctx, p); err == nil {
			t.Errorf("%s: patch accepted", name)
		}
	}
	if all, err := e.drv.ListSettings(e.ctx); err != nil || len(all) != 0 {
		t.Fatalf("settings after refused patches: %+v, %v; want none", all, err)
	}
	if got := e.get(task.ID); got.State != driver.StatePending {
		t.Fatalf("task after refused claims: %s, want pending", got.State)
	}
}
