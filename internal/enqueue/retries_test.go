package enqueue

import (
	"testing"
	"time"

	"github.com/keelq/keel/internal/backoff"
)

func TestRetries(t *testing.T) {
	p := backoff.Policy{Base: time.Second, Max: time.Minute}
	n := 3
	policies, snoozes := Retries(map[string]Options{
		"t.both": {Backoff: &p, MaxSnoozes: &n}, "t.backoff": {Backoff: &p}, "t.none": {},
	})
	if len(policies) != 2 || policies["t.both"] != p || policies["t.backoff"] != p {
		t.Errorf("policies %v", policies)
	}
	if len(snoozes) != 1 || snoozes["t.both"] != 3 {
		t.Errorf("snoozes %v", snoozes)
	}
	if policies, snoozes := Retries(nil); policies == nil || snoozes == nil {
		t.Error("nil maps for no types")
	}
}
