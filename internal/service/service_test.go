package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/keelq/keel/internal/service"
	"github.com/keelq/keel/internal/service/servicetest"
)

type ctxKey struct{}

func TestLoopStopCancelsAndWaits(t *testing.T) {
	t.Parallel()
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	started := make(chan string, 1)
	returned := make(chan struct{})
	l := service.Start(parent, func(ctx context.Context) {
		started <- ctx.Value(ctxKey{}).(string)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // Stop must wait for this
		close(returned)
	})
	if v := servicetest.Recv(t, started); v != "v" {
		t.Fatalf("loop context value = %q, want the parent's", v)
	}
	// Cancelling the parent does not stop the loop: only Stop does.
	cancelParent()
	select {
	case <-returned:
		t.Fatal("loop ended when the parent context was cancelled")
	case <-time.After(20 * time.Millisecond):
	}
	l.Stop()
	select {
	case <-returned:
	default:
		t.Fatal("Stop returned before the loop did")
	}
	l.Stop() // a second Stop is harmless
}

func TestStopNilLoop(t *testing.T) {
	t.Parallel()
	var l *service.Loop
	l.Stop()
}

func TestEveryOnRunsNowThenEachTick(t *testing.T) {
	t.Parallel()
	clk := servicetest.NewClock(time.Unix(1_000_000, 0))
	calls := make(chan time.Time, 10)
	l := service.Start(context.Background(), func(ctx context.Context) {
		service.EveryOn(ctx, clk, time.Second, func(context.Context) { calls <- clk.Now() })
	})
	start := clk.Now()
	if at := servicetest.Recv(t, calls); !at.Equal(start) {
		t.Fatalf("first call at %v, want at once (%v)", at, start)
	}
	clk.WaitForWaiters(t, 1)
	clk.Advance(999 * time.Millisecond)
	clk.Advance(time.Millisecond)
	if at := servicetest.Recv(t, calls); !at.Equal(start.Add(time.Second)) {
		t.Fatalf("second call at %v, want one interval on", at)
	}
	servicetest.None(t, calls)
	clk.Advance(time.Second)
	servicetest.Recv(t, calls)
	l.Stop()
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("ticker not stopped: %d clock waiters after Stop", n)
	}
	servicetest.None(t, calls)
}

func TestEveryRealClockStops(t *testing.T) {
	t.Parallel()
	calls := make(chan struct{}, 100)
	l := service.Start(context.Background(), func(ctx context.Context) {
		service.Every(ctx, time.Millisecond, func(context.Context) { calls <- struct{}{} })
	})
	servicetest.Recv(t, calls)
	servicetest.Recv(t, calls) // a tick of the real ticker
	l.Stop()
	for len(calls) > 0 {
		<-calls
	}
	time.Sleep(5 * time.Millisecond)
	servicetest.None(t, calls)
}

func TestFakeClockAfterAndTickerDrops(t *testing.T) {
	t.Parallel()
	clk := servicetest.NewClock(time.Unix(0, 0))
	if _, ok := <-clk.After(0); !ok {
		t.Fatal("After(0) did not fire at once")
	}
	ch := clk.After(2 * time.Second)
	tk := clk.NewTicker(time.Second)
	clk.Advance(time.Second)
	servicetest.None(t, ch)
	servicetest.Recv(t, tk.C())
	clk.Advance(5 * time.Second) // spans five periods: one tick, as time.Ticker
	if at := servicetest.Recv(t, ch); !at.Equal(time.Unix(2, 0)) {
		t.Fatalf("After fired with %v, want its due time", at)
	}
	servicetest.Recv(t, tk.C())
	servicetest.None(t, tk.C())
	clk.Advance(time.Second) // next tick at 7 s
	servicetest.Recv(t, tk.C())
	tk.Stop()
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("%d waiters after the ticker stopped and After fired", n)
	}
}

func TestRealClockUsesNow(t *testing.T) {
	t.Parallel()
	fixed := time.Unix(42, 0)
	if got := service.Real(func() time.Time { return fixed }).Now(); !got.Equal(fixed) {
		t.Fatalf("Real(now).Now() = %v, want %v", got, fixed)
	}
	clk := servicetest.NewClock(fixed)
	if service.Or(clk, nil) != service.Clock(clk) {
		t.Fatal("Or did not keep the given clock")
	}
	if d := time.Since(service.Or(nil, nil).Now()); d < 0 || d > time.Minute {
		t.Fatalf("Or(nil, nil) is not the wall clock: off by %v", d)
	}
}
