package backoff

import (
	"testing"
	"time"
)

func TestDelayGrowsWithJitterAndCap(t *testing.T) {
	p := Policy{Base: 30 * time.Second, Max: time.Hour, Jitter: 0.2}
	for attempt, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 8: time.Hour, 40: time.Hour} {
		for range 200 {
			d := p.Delay(attempt)
			lo, hi := time.Duration(float64(want)*0.8), min(time.Duration(float64(want)*1.2), p.Max)
			if d < lo || d > hi {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, lo, hi)
			}
		}
	}
	exact := Policy{Base: time.Millisecond, Max: 4 * time.Millisecond}
	if got := exact.Delay(3); got != 4*time.Millisecond {
		t.Fatalf("no jitter: got %v, want 4ms", got)
	}
}

// The cap holds with jitter too (it once applied jitter after the cap, so
// a 1 h maximum let delays reach 1 h 12 min), and capped delays still
// spread below the cap instead of all landing on it.
func TestJitterNeverPassesTheCap(t *testing.T) {
	p := Policy{Base: 30 * time.Second, Max: time.Hour, Jitter: 0.2}
	var below int
	for range 2000 {
		d := p.Delay(20)
		if d > p.Max {
			t.Fatalf("delay %v above the %v cap", d, p.Max)
		}
		if d < 48*time.Minute {
			t.Fatalf("delay %v below the jittered floor of 48m", d)
		}
		if d < p.Max-time.Minute {
			below++
		}
	}
	if below < 1000 {
		t.Fatalf("only %d of 2000 capped delays spread below the cap", below)
	}
	// Just under the cap, the upper half of the spread is cut off.
	near := Policy{Base: 50 * time.Minute, Max: time.Hour, Jitter: 0.2}
	for range 2000 {
		if d := near.Delay(1); d > time.Hour || d < 40*time.Minute {
			t.Fatalf("delay %v outside [40m, 1h]", d)
		}
	}
}
