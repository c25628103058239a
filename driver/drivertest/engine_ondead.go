package drivertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// testEngineOnDeadRescued: a task whose worker vanished on its last
// attempt is dead-lettered by the leader's rescuer with its on_dead
// follow-up, although the leader has no handler for the type nor its
// follow-up type: it reads both from the stored declarations.
func testEngineOnDeadRescued(t *testing.T, e *env) {
	hw := keel.NewHandlers()
	keel.Declare(hw, "od.task", keel.OnDead("od.failed"), keel.MaxAttempts(1))
	keel.Declare(hw, "od.failed", keel.Queue("fallback"), keel.MaxAttempts(7))
	web := e.newClient(keel.Config{Handlers: hw})
	info, err := web.Enqueue(e.ctx, "od.task", map[string]string{"to": "x"}) // stores both declarations
	if err != nil {
		t.Fatal(err)
	}
	// A worker claims it and vanishes.
	if r := e.claimOne("gone", e.clock.Now()); r.ID != info.ID {
		t.Fatalf("claimed %d, want %d", r.ID, info.ID)
	}
	e.clock.Advance(leaseTTL + time.Second)

	hl := keel.NewHandlers()
	keel.Handle(hl, "other", func(context.Context, *keel.Task[struct{}]) error { return nil })
	leader := e.newClient(keel.Config{Handlers: hl, RescueInterval: 20 * time.Millisecond})
	e.startClient(leader)
	dead := e.waitState(info.ID, driver.StateDead)
	if last := dead.Errors[len(dead.Errors)-1]; last.Outcome != driver.OutcomeLeaseExpired {
		t.Fatalf("dead task's last error %+v", last)
	}
	fu, err := leader.List(e.ctx, keel.Filter{Type: "od.failed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fu) != 1 || fu[0].Queue != "fallback" || fu[0].MaxAttempts != 7 || fu[0].State != keel.StatePending {
		t.Fatalf("follow-ups %+v, want one pending in fallback with 7 attempts", fu)
	}
	var d keel.DeadTask
	if err := json.Unmarshal(fu[0].Payload, &d); err != nil {
		t.Fatal(err)
	}
	if d.TaskID != info.ID || d.Type != "od.task" || d.Error != "lease expired: worker lost" || !jsonEqual(d.Payload, []byte(`{"to":"x"}`)) {
		t.Fatalf("follow-up payload %+v", d)
	}
}
