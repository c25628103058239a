package server

import (
	"net/http"
	"testing"

	"github.com/keelq/keel/driver"
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
