package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/chaos/lastrun"
)

// TestSystemPool: GET /v1/system reports the driver's pool, and counts a
// connection a caller holds.
func TestSystemPool(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		var sys System
		b.call(t, "GET", "/v1/system", "").ok(t, http.StatusOK, &sys)
		p := sys.Pool
		if p == nil || p.Max <= 0 || p.InUse < 0 || p.InUse > p.Max || p.Idle < 0 || p.WaitCount < 0 || p.MaxSetting == "" {
			t.Fatalf("pool %+v", p)
		}
		conn, err := b.drv.(driver.DBer).DB().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		b.call(t, "GET", "/v1/system", "").ok(t, http.StatusOK, &sys)
		if sys.Pool.InUse < 1 {
			t.Fatalf("a connection held: pool %+v", sys.Pool)
		}
		b.call(t, "GET", "/v1/system?x=1", "").problem(t, http.StatusBadRequest, "x")
	})
}

// TestSystemChaos: GET /v1/system shows the last keel chaos run recorded
// in keel_meta, and nothing before one is.
func TestSystemChaos(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{})
	var sys System
	b.call(t, "GET", "/v1/system", "").ok(t, http.StatusOK, &sys)
	if sys.Chaos != nil {
		t.Fatalf("chaos %+v before any run", sys.Chaos)
	}
	at := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	rec := lastrun.Record{At: at, Verdict: lastrun.Fail, Database: "sqlite", Scenarios: []string{"kill-worker", "cut"},
		Failed: []string{"kill-worker"}, Skipped: []string{"cut"}, Version: "v1"}
	if err := lastrun.Save(t.Context(), b.drv, rec); err != nil {
		t.Fatal(err)
	}
	b.call(t, "GET", "/v1/system", "").ok(t, http.StatusOK, &sys)
	c := sys.Chaos
	if c == nil || !c.At.Equal(at) || c.Verdict != "fail" || c.Database != "sqlite" || len(c.Scenarios) != 2 ||
		len(c.Failed) != 1 || c.Failed[0] != "kill-worker" || len(c.Skipped) != 1 || c.Version != "v1" {
		t.Fatalf("chaos %+v, want the recorded run %+v", c, rec)
	}
}
