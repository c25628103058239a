package servicetest

import (
	"testing"
	"time"
)

// Recv returns the next value from ch, failing tb if none arrives within
// 10 s: how a test waits for a service's goroutine to act.
func Recv[T any](tb testing.TB, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("servicetest: nothing received after 10s")
		panic("unreachable")
	}
}

// None fails tb if ch holds a value now: for checking that a service did
// not act, after a synchronisation point that proves it had the chance.
func None[T any](tb testing.TB, ch <-chan T) {
	tb.Helper()
	select {
	case v := <-ch:
		tb.Fatalf("servicetest: unexpected %v", v)
	default:
	}
}
