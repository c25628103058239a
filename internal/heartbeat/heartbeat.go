// Package heartbeat extends the leases of every task a process runs with
// one batched statement per interval, and reports tasks whose lease was
// lost so their handlers can be cancelled.
package heartbeat

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Config wires a Heartbeat.
type Config struct {
	Driver   driver.Driver
	Owner    string
	Interval time.Duration
	LeaseTTL time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
	// Running lists the ids this process holds.
	Running func() []int64
	// Lost is called with ids whose lease is no longer ours; all=true means
	// renewals have failed for so long that every lease may be gone.
	Lost func(ids []int64, all bool)
}

// Heartbeat is the lease-renewal service.
type Heartbeat struct {
	cfg  Config
	loop *service.Loop
}

// New returns a Heartbeat.
func New(cfg Config) *Heartbeat { return &Heartbeat{cfg: cfg} }

// Start begins renewing.
func (h *Heartbeat) Start(ctx context.Context) {
	last := h.cfg.Now()
	h.loop = service.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(h.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if ok, at := h.beat(ctx); ok {
				last = at
			} else if h.cfg.Now().Sub(last) > h.cfg.LeaseTTL-h.cfg.Interval {
				// Renewal keeps failing: stop handlers before another
				// process is allowed to take their tasks over.
				h.cfg.Lost(nil, true)
			}
		}
	})
}

// Stop stops renewing.
func (h *Heartbeat) Stop() { h.loop.Stop() }

// beat renews every lease held and reports whether it could, with the time
// the renewed leases count from: the time taken before the write, not after
// it, since a slow write does not make the leases last longer.
func (h *Heartbeat) beat(ctx context.Context) (bool, time.Time) {
	ids := h.cfg.Running()
	if len(ids) == 0 {
		return true, h.cfg.Now()
	}
	now := h.cfg.Now()
	held, err := h.cfg.Driver.Heartbeat(ctx, driver.HeartbeatParams{
		Owner: h.cfg.Owner, IDs: ids, Now: now, LeaseExpiresAt: now.Add(h.cfg.LeaseTTL),
	})
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Warn("keel: heartbeat failed", "error", err, "tasks", len(ids))
		}
		return false, now
	}
	if len(held) == len(ids) {
		return true, now
	}
	have := make(map[int64]bool, len(held))
	for _, id := range held {
		have[id] = true
	}
	var lost []int64
	for _, id := range ids {
		if !have[id] {
			lost = append(lost, id)
		}
	}
	h.cfg.Lost(lost, false)
	return true, now
}
