package keel_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// TestOnDead: a task that dies gets one follow-up of its type's on_dead
// type carrying its id, type, queue, attempt, last error and payload, and
// the OnDead hook runs once for it (after failing once: the hook is a
// task, retried). A follow-up that dies gets no follow-up of its own, and
// a task that succeeds gets none.
func TestOnDead(t *testing.T) {
	ctx := context.Background()
	h := keel.NewHandlers()
	keel.Handle(h, "t.send", func(ctx context.Context, task *keel.Task[payload]) error {
		if task.Args.N == 0 {
			return nil
		}
		return keel.Permanent(errors.New("recipient gone"))
	}, keel.OnDead("t.send.failed"))
	keel.Handle(h, "t.send.failed", func(ctx context.Context, task *keel.Task[keel.DeadTask]) error {
		return keel.Permanent(errors.New("the follow-up dies too"))
	}, keel.Queue("fallback"), keel.OnDead("t.send"))
	var mu sync.Mutex
	calls := map[int64]int{}
	failedOnce := false
	c, _ := setup(t, func(cfg *keel.Config) {
		cfg.Handlers, cfg.Types = h, nil
		cfg.PollInterval, cfg.BackoffJitter = 20*time.Millisecond, -1
		cfg.Queues = map[string]keel.QueueConfig{"default": {MaxWorkers: 2}, "fallback": {MaxWorkers: 2}}
		cfg.Alerts.Interval = 100 * time.Millisecond
		cfg.OnDead = func(ctx context.Context, info keel.TaskInfo) error {
			mu.Lock()
			defer mu.Unlock()
			if !failedOnce {
				failedOnce = true
				return errors.New("hook fails once")
			}
			calls[info.ID]++
			return nil
		}
	})
	dead, err := c.Enqueue(ctx, "t.send", payload{N: 7, S: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := c.Enqueue(ctx, "t.send", payload{N: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c.Stop(stopCtx)
	}()
	var followUps []*keel.TaskInfo
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		followUps, err = c.List(ctx, keel.Filter{Type: "t.send.failed"})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if len(followUps) == 1 && followUps[0].State == keel.StateDead && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follow-ups %d, hook calls %v after 60s", len(followUps), calls)
		}
	}
	fu := followUps[0]
	var d keel.DeadTask
	if err := json.Unmarshal(fu.Payload, &d); err != nil {
		t.Fatal(err)
	}
	if fu.Queue != "fallback" || d.TaskID != dead.ID || d.Type != "t.send" || d.Queue != "default" || d.Attempt != 1 ||
		d.Error != "permanent: recipient gone" || string(d.Payload) != `{"n":7,"s":"x"}` {
		t.Fatalf("follow-up in %s: %+v", fu.Queue, d)
	}
	// The hook ran once for the dead task and once for the dead follow-up
	// (its type is handled here too), but the dead follow-up got no
	// follow-up of its own, and the succeeded task none.
	time.Sleep(300 * time.Millisecond) // a second follow-up, if any, would be written by now
	mu.Lock()
	defer mu.Unlock()
	if calls[dead.ID] != 1 || calls[fu.ID] != 1 || calls[ok.ID] != 0 {
		t.Fatalf("hook calls %v, want one for %d and one for %d", calls, dead.ID, fu.ID)
	}
	all, err := c.List(ctx, keel.Filter{Type: "t.send"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("%d t.send tasks, want the 2 enqueued (no follow-up of a follow-up)", len(all))
	}
}
