package config

import (
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/engine"
)

// Engine returns the engine's settings from f (after Default) and the
// client's queues; the client adds its driver, handlers and services.
func Engine[Q QueueConfig](f Fields, queues map[string]Q) engine.Config {
	cfg := engine.Config{Node: *f.Node, Version: *f.Version, Logger: *f.Logger, Now: *f.Now,
		Queues: make(map[string]int, len(queues)), QueuePrefetch: make(map[string]int, len(queues)),
		Backoff:    backoff.Policy{Base: *f.BackoffBase, Max: *f.BackoffMax, Jitter: max(*f.BackoffJitter, 0)},
		MaxSnoozes: *f.MaxSnoozes, LeaseTTL: *f.LeaseTTL, HeartbeatInterval: *f.HeartbeatInterval,
		PollInterval: *f.PollInterval, RescueInterval: *f.RescueInterval, ReconcileInterval: *f.ReconcileInterval,
		MaintainInterval: *f.MaintainInterval, HistoryRetention: *f.HistoryRetention, SettingsInterval: *f.SettingsInterval,
		RetainSucceeded: *f.RetainSucceeded, RetainDead: *f.RetainDead, DeleteArchivedAfter: *f.DeleteArchivedAfter,
		ArchiveInterval: *f.ArchiveInterval, ArchiveBatch: *f.ArchiveBatch, ClaimBatch: *f.ClaimBatch,
		TimeoutGrace: *f.TimeoutGrace, MaxRunaway: *f.MaxRunawayHandlers}
	for name, c := range queues {
		q := Queue(c)
		cfg.Queues[name], cfg.QueuePrefetch[name] = q.MaxWorkers, max(q.Prefetch, 0)
	}
	return cfg
}
