package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// Every due time added fires, in order, each close to its time, including
// ones added while an earlier timer is armed and ones later than others.
func TestDueTimerFiresForEveryDueTime(t *testing.T) {
	fired := make(chan time.Time, 16)
	dt := newDueTimer(time.Now, func() { fired <- time.Now() })
	defer dt.stop()
	t0 := time.Now()
	offsets := []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond}
	for _, d := range offsets {
		dt.add(t0.Add(d))
	}
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		select {
		case at := <-fired:
			if got := at.Sub(t0); got < want || got > want+time.Second {
				t.Fatalf("fired at +%v, want +%v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake-up for +%v", want)
		}
	}
	select {
	case at := <-fired:
		t.Fatalf("extra wake-up at +%v (the duplicate due time should be one)", at.Sub(t0))
	case <-time.After(200 * time.Millisecond):
	}
}

func TestDueTimerStopDisarms(t *testing.T) {
	var n atomic.Int32
	dt := newDueTimer(time.Now, func() { n.Add(1) })
	dt.add(time.Now().Add(50 * time.Millisecond))
	dt.stop()
	dt.add(time.Now().Add(10 * time.Millisecond)) // ignored after stop
	time.Sleep(200 * time.Millisecond)
	if n.Load() != 0 {
		t.Fatalf("fired %d times after stop", n.Load())
	}
}

// Past maxDue the latest due times are dropped (the poll finds them), so a
// flood of retries cannot grow the list without bound.
func TestDueTimerBounded(t *testing.T) {
	dt := newDueTimer(time.Now, func() {})
	defer dt.stop()
	base := time.Now().Add(time.Hour)
	for i := range maxDue + 100 {
		dt.add(base.Add(time.Duration(maxDue+100-i) * time.Second))
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if len(dt.due) != maxDue {
		t.Fatalf("%d due times kept, want %d", len(dt.due), maxDue)
	}
	if !dt.due[0].Equal(base.Add(time.Second)) {
		t.Fatalf("earliest kept is %v, want the earliest added", dt.due[0].Sub(base))
	}
}
