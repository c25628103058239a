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
			lo, hi := time.Duration(float64(want)*0.8), time.Duration(float64(want)*1.2)
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
