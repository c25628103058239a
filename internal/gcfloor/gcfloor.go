// Package gcfloor keeps a small heap from being collected every few
// megabytes.
//
// Go's collector starts a cycle when the heap has grown by GOGC percent
// (100) over what the last cycle left live, and at 4 MB at the least. keel
// serve keeps only a few megabytes live, so under load it collected 50
// times a second: every request and every task paid for marking, assists
// and write barriers, about a fifth of its throughput over HTTP. A heap
// floor sets the collector's percent so that the heap may grow to the
// floor before a cycle starts while the live heap is small; once the live
// heap is larger than half the floor, the percent is GOGC's default again.
// Memory grows by at most the floor.
package gcfloor

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Bounds of the percent Start sets: never below Go's default, and never
// so high that a live heap of almost nothing grows without end.
const (
	minPercent = 100
	maxPercent = 5000
)

// Percent is the GOGC percent that moves the collector's heap goal to
// floor, given the goal now (goal bytes under percent now): the goal is
// what the last cycle left live times 1 + percent/100, so the percent
// scales with floor/goal. It is never below 100 (Go's default: reached
// once half the floor is live) and at most 5000.
func Percent(goal uint64, now int, floor uint64) int {
	if goal == 0 || now < 0 {
		return minPercent // no goal to scale (GC off): Go's default
	}
	scaled := floor * uint64(100+now) / goal // the new percent + 100
	if scaled < 100+minPercent {
		return minPercent
	}
	return int(min(scaled-100, maxPercent))
}

// The one tuner of the process: Start may be called by several servers of
// one process (tests run many); the first starts it, the last stop ends it
// and puts back the percent the first found.
var tuner struct {
	mu    sync.Mutex
	users int
	prev  int
	done  chan struct{}
	wg    sync.WaitGroup
}

// Start sets the collector's percent for a floor of floor bytes now and
// again every interval, as the heap changes, until stop is called; stop
// puts back the percent Start found. The process should have no GOGC of
// its own: Start overrides it. While one Start is running, another only
// joins it (its floor and interval are the first one's).
func Start(floor uint64, every time.Duration) (stop func()) {
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	tuner.users++
	if tuner.users == 1 {
		tuner.done = make(chan struct{})
		tuner.prev = run(floor, every, tuner.done, &tuner.wg)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			tuner.mu.Lock()
			defer tuner.mu.Unlock()
			tuner.users--
			if tuner.users == 0 {
				close(tuner.done)
				tuner.wg.Wait()
				debug.SetGCPercent(tuner.prev)
			}
		})
	}
}

// run sets the percent for floor and keeps it set, every interval, until
// done is closed; it returns the percent it found.
func run(floor uint64, every time.Duration, done <-chan struct{}, wg *sync.WaitGroup) (prev int) {
	sample := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	goal := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0 // unknown: Percent leaves Go's default
		}
		return sample[0].Value.Uint64()
	}
	prev = debug.SetGCPercent(100) // the goal read next is for 100
	set := Percent(goal(), 100, floor)
	debug.SetGCPercent(set)
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			// Only a change of a tenth or more is worth setting.
			if p := Percent(goal(), set, floor); p*10 < set*9 || p*10 > set*11 {
				debug.SetGCPercent(p)
				set = p
			}
		}
	})
	return prev
}
