package ondead_test

import (
	"testing"

	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/ondead"
)

func TestInstall(t *testing.T) {
	for _, hook := range []bool{false, true} {
		f := ondead.New(ondead.Config{HookQueue: "keel"})
		cfg := engine.Config{Queues: map[string]int{"default": 10},
			Handlers: map[string]engine.Handler{}, TypeBackoff: map[string]backoff.Policy{}}
		f.Install(&cfg, hook, 4)
		if cfg.FollowUps == nil {
			t.Errorf("hook %v: no follow-ups", hook)
		}
		_, queued := cfg.Queues["keel"]
		if queued != hook || (hook && cfg.Queues["keel"] != 4) || (cfg.Handlers[ondead.Type] != nil) != hook ||
			(hook && cfg.TypeBackoff[ondead.Type] != ondead.Backoff) {
			t.Errorf("hook %v: queues %v, handlers %v, backoff %v", hook, cfg.Queues, cfg.Handlers, cfg.TypeBackoff)
		}
	}
}
