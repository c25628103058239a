package ondead

import "github.com/keelq/keel/internal/engine"

// Install adds f to the engine's cfg: the follow-ups of every task it
// dead-letters and, when the client has an OnDead hook, Type's tasks,
// run in HookQueue with workers workers.
func (f *Fallback) Install(cfg *engine.Config, hook bool, workers int) {
	cfg.FollowUps = f.FollowUps
	if hook {
		cfg.Queues[f.cfg.HookQueue] = workers
		cfg.Handlers[Type], cfg.TypeBackoff[Type] = f.Handle, Backoff
	}
}
