package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel/driver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeNotifier delivers the queues sent on ch, fails once when it receives
// "fail", and records whether Listen returned.
type fakeNotifier struct {
	ch       chan string
	mu       sync.Mutex
	returned bool
}

func (f *fakeNotifier) Listen(ctx context.Context, p driver.ListenParams) error {
	defer func() {
		f.mu.Lock()
		f.returned = true
		f.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case q := <-f.ch:
			if q == "fail" {
				p.Error(errors.New("connection lost"))
				q = "" // reconnected: wake every queue
			}
			p.Wake(q)
		}
	}
}

func TestListenerWakesAndStops(t *testing.T) {
	f := &fakeNotifier{ch: make(chan string)}
	woken := make(chan string, 10)
	l := New(Config{Notifier: f, Logger: slog.New(slog.DiscardHandler), Wake: func(q string) { woken <- q }})
	l.Start(context.Background())
	for _, send := range []string{"default", "fail", "emails"} {
		f.ch <- send
		want := send
		if send == "fail" {
			want = ""
		}
		select {
		case got := <-woken:
			if got != want {
				t.Fatalf("woken for %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %q", send)
		}
	}
	l.Stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.returned {
		t.Fatal("Stop returned before Listen did")
	}
	l.Stop() // idempotent
}

func TestNilListenerStop(t *testing.T) {
	var l *Listener
	l.Stop()
	New(Config{}).Stop()
}
