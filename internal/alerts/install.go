package alerts

import (
	"time"

	"github.com/keelq/keel/internal/engine"
)

// Install adds the alerter to the engine's cfg, its rules evaluated every
// interval: the deliveries and the drill run as keel's own tasks in
// Queue, with workers workers, so that they never wait behind users'
// tasks. Queue's tasks are enqueued by this process (which wakes its
// workers) or retried on its due timer, so Queue polls only as a
// fallback, as often as the rules are evaluated.
func (a *Alerter) Install(cfg *engine.Config, workers int, interval time.Duration) {
	cfg.Queues[Queue] = workers
	cfg.QueuePoll = map[string]time.Duration{Queue: max(cfg.PollInterval, interval)}
	for t, h := range a.Handlers() {
		cfg.Handlers[t] = h
		cfg.TypeBackoff[t] = a.Backoff()
	}
	cfg.Loops = append(cfg.Loops, engine.Loop{Interval: interval, Run: a.RunOnce})
}
