package httptarget_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

// silentListener listens on a local port, accepts every connection and
// never writes a byte; it returns the address.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// timedOut runs one attempt of a task bound to tg and checks that it is
// recorded with the message want and outcome timeout, after about d.
func timedOut(t *testing.T, tg httptarget.Target, want string, d time.Duration) {
	t.Helper()
	c := start(t, func(h *keel.Handlers) { mustRegister(t, h, "hook", tg, keel.MaxAttempts(1)) })
	done := keeltest.WaitFinished(t, c, enqueue(t, c, "hook", nil).ID, 0)
	if done.State != keel.StateDead || len(done.Errors) != 1 {
		t.Fatalf("task %s with errors %v, want dead after one attempt", done.State, done.Errors)
	}
	e := done.Errors[0]
	if e.Error != want || e.Outcome != "timeout" {
		t.Errorf("attempt error %q (outcome %s), want %q (outcome timeout)", e.Error, e.Outcome, want)
	}
	if took := e.End.Sub(e.Start); took < d || took > d+5*time.Second {
		t.Errorf("attempt took %v, want about %v", took, d)
	}
}

// TestReadTimeoutIsTimeout: a server that accepts the connection and never
// answers ends the attempt at the read timeout, with outcome timeout.
func TestReadTimeoutIsTimeout(t *testing.T) {
	t.Parallel()
	url := "http://" + silentListener(t) + "/hook"
	timedOut(t, httptarget.Target{URL: url, ReadTimeout: 200 * time.Millisecond},
		"read timeout after 200ms: no response (POST "+url+")", 200*time.Millisecond)
}

// TestConnectTimeoutIsTimeout: a listener whose accept queue is full drops
// new connection attempts (on Linux), so the dial times out: outcome
// timeout.
func TestConnectTimeoutIsTimeout(t *testing.T) {
	t.Parallel()
	url := "http://" + fullListener(t) + "/hook"
	timedOut(t, httptarget.Target{URL: url, ConnectTimeout: 200 * time.Millisecond},
		"connect timeout after 200ms (POST "+url+")", 200*time.Millisecond)
}
