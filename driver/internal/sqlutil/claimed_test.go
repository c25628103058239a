package sqlutil_test

import (
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// TestClaimedRowsOutliveTheCollector: the rows Rows returns are the
// claim's, in UTC and running under its owner, and stay as they were after
// the collector is released and reused by the next claim.
func TestClaimedRowsOutliveTheCollector(t *testing.T) {
	zone := time.FixedZone("X", 3600)
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, zone)
	claim := func(p driver.ClaimParams, ids ...int64) []driver.TaskRow {
		c := sqlutil.GetClaimed()
		defer c.Release()
		if c.Len() != 0 {
			t.Fatalf("a collector from the pool holds %d rows", c.Len())
		}
		for _, id := range ids {
			c.ID, c.Type, c.Fence, c.TimeoutMS = id, "type", id*10, 1500
			c.Payload, c.Meta = []byte(`{"id":1}`), nil
			c.RunAt, c.CreatedAt, c.AttemptedAt = at, at, at
			c.Add(p)
		}
		return c.Rows()
	}
	if rows := claim(driver.ClaimParams{Queue: "q"}); rows != nil {
		t.Fatalf("an empty claim returned %v, want nil", rows)
	}
	first := claim(driver.ClaimParams{Queue: "q", Owner: "a"}, 1, 2, 3)
	second := claim(driver.ClaimParams{Queue: "r", Owner: "b"}, 4, 5)
	for i, r := range first {
		id := int64(i + 1)
		if r.ID != id || r.Fence != id*10 || r.Queue != "q" || r.LeaseOwner != "a" || r.State != driver.StateRunning ||
			r.Type != "type" || string(r.Payload) != `{"id":1}` || r.Timeout != 1500*time.Millisecond ||
			r.RunAt.Location() != time.UTC || !r.RunAt.Equal(at) || !r.LeaseExpiresAt.IsZero() {
			t.Errorf("first claim's row %d after the second claim: %+v", i, r)
		}
	}
	if len(first) != 3 || len(second) != 2 || second[0].ID != 4 || second[1].Queue != "r" || second[1].LeaseOwner != "b" {
		t.Errorf("claims of %d and %d rows, second %+v", len(first), len(second), second)
	}
}
