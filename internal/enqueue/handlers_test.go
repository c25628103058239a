package enqueue

import (
	"strings"
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

func TestMustRegister(t *testing.T) {
	if d := MustRegister("Handle", "t.ok", false, []func(*Options){func(o *Options) { q := "q"; o.Queue = &q }}); d.Queue == nil || *d.Queue != "q" {
		t.Fatalf("defaults %+v", d)
	}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "t.dup") {
			t.Fatalf("panic %q, want the registration's error", msg)
		}
	}()
	MustRegister[func(*Options)]("Handle", "t.dup", true, nil)
}
