package drivertest

import (
	"context"
	"testing"

	"github.com/keelq/keel/driver"
)

// testPoolStats: a driver that reports its pool (driver.PoolStater) counts
// a connection held by a caller as in use, within its limit, and names
// the setting of that limit.
func testPoolStats(t *testing.T, e *env) {
	ps, ok := e.drv.(driver.PoolStater)
	if !ok {
		t.Skip("the driver does not report its pool")
	}
	s := ps.PoolStats()
	if s.Max <= 0 || s.InUse < 0 || s.InUse > s.Max || s.Idle < 0 || s.WaitCount < 0 || s.WaitDuration < 0 || s.MaxSetting == "" {
		t.Fatalf("fresh driver: implausible pool %+v", s)
	}
	dber, ok := e.drv.(driver.DBer)
	if !ok {
		return
	}
	conn, err := dber.DB().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := ps.PoolStats()
	conn.Close()
	if held.InUse < 1 || held.InUse > held.Max {
		t.Fatalf("a connection held: pool %+v, want at least 1 in use", held)
	}
}
