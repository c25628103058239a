package drivertest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Idempotent HTTP requests (driver.IdempotencyStore): one key runs once,
// its response is kept for replay until it expires, a released key runs
// again, and only the owner of an in-flight row finishes or releases it.

func (e *env) idemStore() driver.IdempotencyStore {
	e.t.Helper()
	s, ok := e.drv.(driver.IdempotencyStore)
	if !ok {
		e.t.Skip("driver does not implement driver.IdempotencyStore")
	}
	return s
}

func digestOf(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

func (e *env) beginReq(key, body, owner string, now time.Time) (driver.BeginOutcome, *driver.StoredResponse) {
	e.t.Helper()
	out, resp, err := e.idemStore().BeginRequest(e.ctx, driver.BeginRequestParams{
		Scope: "POST /orders", Key: key, Digest: digestOf(body), Owner: owner,
		Now: now, TTL: time.Hour, Lock: time.Minute,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out, resp
}

func (e *env) finishReq(key, owner string, resp driver.StoredResponse) bool {
	e.t.Helper()
	ok, err := e.idemStore().FinishRequest(e.ctx, driver.FinishRequestParams{Scope: "POST /orders", Key: key, Owner: owner, Response: resp})
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

func wantOutcome(t *testing.T, what string, got, want driver.BeginOutcome) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: outcome %v, want %v", what, got, want)
	}
}

func testIdempotentHTTPLifecycle(t *testing.T, e *env) {
	s := e.idemStore()
	now := e.clock.Now()
	out, _ := e.beginReq("k1", "a", "o1", now)
	wantOutcome(t, "first begin", out, driver.BeginFirst)
	out, _ = e.beginReq("k1", "a", "o2", now)
	wantOutcome(t, "duplicate in flight", out, driver.BeginInFlight)
	out, _ = e.beginReq("k1", "b", "o2", now)
	wantOutcome(t, "other body in flight", out, driver.BeginMismatch)

	// Another scope is another key.
	out, _, err := s.BeginRequest(e.ctx, driver.BeginRequestParams{Scope: "POST /refunds", Key: "k1", Digest: digestOf("b"),
		Owner: "o3", Now: now, TTL: time.Hour, Lock: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "same key, other scope", out, driver.BeginFirst)

	want := driver.StoredResponse{Status: 201, Headers: []byte(`{"Content-Type":["application/json"]}`), Body: []byte(`{"id":7}`)}
	if e.finishReq("k1", "o2", want) {
		t.Fatal("finish by a non-owner applied")
	}
	if ok, err := s.ReleaseRequest(e.ctx, "POST /orders", "k1", "o2"); err != nil || ok {
		t.Fatalf("release by a non-owner: %v, %v", ok, err)
	}
	if !e.finishReq("k1", "o1", want) {
		t.Fatal("finish by the owner did not apply")
	}
	if e.finishReq("k1", "o1", want) {
		t.Fatal("second finish applied")
	}
	out, got := e.beginReq("k1", "a", "o4", e.clock.Advance(time.Minute))
	wantOutcome(t, "replay", out, driver.BeginDone)
	if got == nil || got.Status != want.Status || !bytes.Equal(got.Headers, want.Headers) || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("stored response %+v, want %+v", got, want)
	}
	out, _ = e.beginReq("k1", "b", "o4", e.clock.Now())
	wantOutcome(t, "other body after done", out, driver.BeginMismatch)
	if ok, err := s.ReleaseRequest(e.ctx, "POST /orders", "k1", "o1"); err != nil || ok {
		t.Fatalf("release of a done row: %v, %v", ok, err)
	}

	// An empty body and no headers come back empty.
	out, _ = e.beginReq("k2", "a", "o1", e.clock.Now())
	wantOutcome(t, "k2 first", out, driver.BeginFirst)
	e.finishReq("k2", "o1", driver.StoredResponse{Status: 204})
	out, got = e.beginReq("k2", "a", "o2", e.clock.Now())
	wantOutcome(t, "k2 replay", out, driver.BeginDone)
	if got.Status != 204 || len(got.Headers) != 0 || len(got.Body) != 0 {
		t.Fatalf("empty response stored as %+v", got)
	}
}

func testIdempotentHTTPRelease(t *testing.T, e *env) {
	s := e.idemStore()
	now := e.clock.Now()
	out, _ := e.beginReq("k", "a", "o1", now)
	wantOutcome(t, "first", out, driver.BeginFirst)
	if ok, err := s.ReleaseRequest(e.ctx, "POST /orders", "k", "o1"); err != nil || !ok {
		t.Fatalf("release by the owner: %v, %v", ok, err)
	}
	out, _ = e.beginReq("k", "b", "o2", now)
	wantOutcome(t, "after release, any body", out, driver.BeginFirst)
	if e.finishReq("k", "o1", driver.StoredResponse{Status: 200}) {
		t.Fatal("finish by the released owner applied")
	}
}

func testIdempotentHTTPExpiry(t *testing.T, e *env) {
	s := e.idemStore()
	now := e.clock.Now()
	e.beginReq("done", "a", "o1", now)
	e.finishReq("done", "o1", driver.StoredResponse{Status: 200, Body: []byte("x")})
	e.beginReq("stuck", "a", "o1", now)

	// Before the lock runs out the in-flight row holds.
	out, _ := e.beginReq("stuck", "a", "o2", now.Add(59*time.Second))
	wantOutcome(t, "in flight before the lock ends", out, driver.BeginInFlight)
	// After: the same request takes it over; another body does not.
	out, _ = e.beginReq("stuck", "b", "o2", now.Add(time.Minute))
	wantOutcome(t, "other body after the lock ends", out, driver.BeginMismatch)
	out, _ = e.beginReq("stuck", "a", "o2", now.Add(time.Minute))
	wantOutcome(t, "take over after the lock ends", out, driver.BeginFirst)
	if e.finishReq("stuck", "o1", driver.StoredResponse{Status: 200}) {
		t.Fatal("the first owner finished after a take-over")
	}
	if !e.finishReq("stuck", "o2", driver.StoredResponse{Status: 200}) {
		t.Fatal("the new owner could not finish")
	}

	// A done row replays until it expires, then the key is new, any body.
	out, _ = e.beginReq("done", "a", "o3", now.Add(time.Hour-time.Second))
	wantOutcome(t, "done before expiry", out, driver.BeginDone)
	out, _ = e.beginReq("done", "b", "o3", now.Add(time.Hour))
	wantOutcome(t, "done after expiry", out, driver.BeginFirst)

	// Purge deletes what expired: "stuck" (expires at now+1m+1h) stays
	// until then; "done" was renewed at now+1h.
	n, err := s.PurgeRequests(e.ctx, now.Add(time.Hour+time.Minute-time.Second))
	if err != nil || n != 0 {
		t.Fatalf("purge before anything expired: %d, %v", n, err)
	}
	n, err = s.PurgeRequests(e.ctx, now.Add(2*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("purge after both expired: %d, %v (want 2)", n, err)
	}
	out, _ = e.beginReq("stuck", "a", "o4", now)
	wantOutcome(t, "purged key", out, driver.BeginFirst)
}

func testIdempotentHTTPConcurrentBegin(t *testing.T, e *env) {
	s := e.idemStore()
	now := e.clock.Now()
	const n = 8
	outs := make([]driver.BeginOutcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _, errs[i] = s.BeginRequest(e.ctx, driver.BeginRequestParams{Scope: "POST /orders", Key: "race",
				Digest: digestOf("a"), Owner: fmt.Sprint("o", i), Now: now, TTL: time.Hour, Lock: time.Minute})
		}()
	}
	wg.Wait()
	first := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("begin %d: %v", i, errs[i])
		}
		switch outs[i] {
		case driver.BeginFirst:
			first++
		case driver.BeginInFlight:
		default:
			t.Fatalf("begin %d: outcome %v", i, outs[i])
		}
	}
	if first != 1 {
		t.Fatalf("%d of %d concurrent begins were first, want exactly 1", first, n)
	}
}

func testIdempotentHTTPBadParams(t *testing.T, e *env) {
	s := e.idemStore()
	now := e.clock.Now()
	good := driver.BeginRequestParams{Scope: "POST /orders", Key: "k", Digest: digestOf("a"), Owner: "o", Now: now, TTL: time.Hour, Lock: time.Minute}
	long := string(bytes.Repeat([]byte("x"), 256))
	for name, mod := range map[string]func(*driver.BeginRequestParams){
		"empty key":    func(p *driver.BeginRequestParams) { p.Key = "" },
		"long key":     func(p *driver.BeginRequestParams) { p.Key = long },
		"empty scope":  func(p *driver.BeginRequestParams) { p.Scope = "" },
		"long scope":   func(p *driver.BeginRequestParams) { p.Scope = long },
		"short digest": func(p *driver.BeginRequestParams) { p.Digest = p.Digest[:16] },
		"no owner":     func(p *driver.BeginRequestParams) { p.Owner = "" },
		"zero ttl":     func(p *driver.BeginRequestParams) { p.TTL = 0 },
		"lock > ttl":   func(p *driver.BeginRequestParams) { p.Lock = 2 * time.Hour },
	} {
		p := good
		mod(&p)
		if _, _, err := s.BeginRequest(e.ctx, p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := s.FinishRequest(e.ctx, driver.FinishRequestParams{Scope: "POST /orders", Key: "k", Owner: "o", Response: driver.StoredResponse{Status: 42}}); err == nil {
		t.Error("status 42 accepted")
	}
	// Nothing was written: the key is new.
	out, _, err := s.BeginRequest(e.ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "after bad input", out, driver.BeginFirst)
}
