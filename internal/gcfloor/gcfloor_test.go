package gcfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		goal  uint64
		now   int
		floor uint64
		want  int
	}{
		{6 * mb, 100, 32 * mb, 966},    // 3 MB live: it may grow to the floor
		{16 * mb, 100, 32 * mb, 300},   // 8 MB live × 4 = 32 MB
		{32 * mb, 100, 32 * mb, 100},   // half the floor live: Go's default
		{200 * mb, 100, 32 * mb, 100},  // a large heap: Go's default
		{49 * mb, 3100, 32 * mb, 1989}, // a goal past the floor comes down
		{32 * mb, 966, 32 * mb, 966},   // at the floor: unchanged
		{64 * mb, 300, 32 * mb, 100},   // 16 MB live now: Go's default
		{1000, 100, 32 * mb, 5000},     // almost nothing live: capped
		{0, 100, 32 * mb, 100},         // no goal: Go's default
		{8 * mb, -1, 32 * mb, 100},     // GC off: Go's default
		{8 * mb, 100, 0, 100},          // no floor
		{1 << 30, 100, 1 << 40, 5000},  // a huge floor: capped
		{1 << 31, 100, 1 << 31, 100},   // large numbers: no overflow
		{1 << 30, 100, 1 << 32, 700},   // 512 MB live × 8 = 4 GB
		{30 * mb, 100, 32 * mb, 113},   // 15 MB live: just under half
	} {
		if got := Percent(c.goal, c.now, c.floor); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.goal, c.now, c.floor, got, c.want)
		}
	}
}

// gogc reads the collector's percent without changing it.
func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestStartRaisesAndRestores: with a floor far above this test's live heap
// the percent rises at once, and stop puts back the one found.
func TestStartRaisesAndRestores(t *testing.T) {
	before := gogc(t)
	runtime.GC() // a live heap figure to start from
	stop := Start(1<<30, 10*time.Millisecond)
	if got := gogc(t); got <= 100 {
		t.Errorf("with a 1 GiB floor the percent is %d, want more than 100", got)
	}
	time.Sleep(30 * time.Millisecond) // a few adjustments
	stop()
	stop() // a second stop does nothing
	if got := gogc(t); got != before {
		t.Errorf("after stop the percent is %d, want %d as before", got, before)
	}
}

// TestStartLeavesALargeHeap: a floor under the live heap leaves Go's
// default.
func TestStartLeavesALargeHeap(t *testing.T) {
	runtime.GC()
	stop := Start(1, 10*time.Millisecond)
	defer stop()
	if got := gogc(t); got != 100 {
		t.Errorf("with a floor under the live heap the percent is %d, want 100", got)
	}
}

// TestStartNested: a second Start joins the first; the percent found is
// put back only when the last one stops.
func TestStartNested(t *testing.T) {
	before := gogc(t)
	runtime.GC()
	stopA := Start(1<<30, 10*time.Millisecond)
	raised := gogc(t)
	stopB := Start(1<<30, 10*time.Millisecond)
	stopA()
	if got := gogc(t); got == before {
		t.Errorf("after the first of two stops the percent is back to %d: the second server lost its floor", got)
	}
	stopB()
	if got := gogc(t); got != before {
		t.Errorf("after both stops the percent is %d, want %d (raised to %d meanwhile)", got, before, raised)
	}
}
