package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// LimitedClaimDatabaseClock checks a driver that judges time by the
// database's clock (not the caller's): a rate's token bucket refills by
// that clock too, so a worker whose clock is a day behind and stands still
// still gets its next token on time. d must be fresh and migrated.
func LimitedClaimDatabaseClock(t *testing.T, d driver.Driver) {
	ctx := context.Background()
	c, err := keel.NewClient(keel.Config{Driver: d, Types: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.Enqueue(ctx, "t", args{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	frozen := time.Now().Add(-24 * time.Hour)
	if _, err := d.PatchSetting(ctx, driver.SettingPatch{Kind: driver.SettingType, Name: "t", Rate: ptr(2.0), Burst: ptr(1), Now: frozen}); err != nil {
		t.Fatal(err)
	}
	claim := func() driver.LimitedClaim {
		t.Helper()
		res, err := d.ClaimLimited(ctx, driver.LimitedClaimParams{
			ClaimParams: driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 5, Owner: "w", Now: frozen, LeaseExpiresAt: frozen.Add(time.Hour)},
			Limits:      []driver.Limit{{Kind: driver.SettingType, Name: "t"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if got := claim(); len(got.Rows) != 1 || got.TokenIn <= 0 || got.TokenIn > 500*time.Millisecond {
		t.Fatalf("full bucket of 1: %d rows, next token in %v; want 1, within 500ms", len(got.Rows), got.TokenIn)
	}
	got := claim()
	if len(got.Rows) != 0 || got.TokenIn <= 0 || got.TokenIn > 500*time.Millisecond {
		t.Fatalf("empty bucket: %d rows, next token in %v; want 0, within 500ms", len(got.Rows), got.TokenIn)
	}
	time.Sleep(got.TokenIn + 100*time.Millisecond)
	if got := claim(); len(got.Rows) != 1 {
		t.Fatalf("after the next token is due by the database's clock: %d rows, want 1 (the caller's clock stood still)", len(got.Rows))
	}
}
