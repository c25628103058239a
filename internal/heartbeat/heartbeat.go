// Package heartbeat extends the leases of every task a process runs with
// one batched statement per interval, and reports tasks whose lease was
// lost so their handlers can be cancelled.
package heartbeat

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Renewer is what a Heartbeat needs of a driver.
type Renewer interface {
	Heartbeat(ctx context.Context, params driver.HeartbeatParams) ([]int64, error)
}

// Config wires a Heartbeat.
type Config struct {
	Driver   Renewer
	Owner    string
	Interval time.Duration
	LeaseTTL time.Duration
	// Clock paces the renewals; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Running lists the ids this process holds.
	Running func() []int64
	// Lost is called with ids whose lease is no longer ours; all=true means
	// renewals have failed for so long that every lease may be gone before
	// the next renewal.
	Lost func(ids []int64, all bool)
}

// Heartbeat is the lease-renewal service.
type Heartbeat struct {
	cfg  Config
	clk  service.Clock
	loop *service.Loop

	mu      sync.Mutex
	renewed map[int64]time.Time // lease expiry written by the last renewal, per id it held
	warned  time.Time           // the last slow-renewal warning (checkLatency); the loop's own
}

// New returns a Heartbeat.
func New(cfg Config) *Heartbeat {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Heartbeat{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// Start begins renewing, every Interval.
func (h *Heartbeat) Start(ctx context.Context) {
	last := h.clk.Now()
	h.loop = service.Start(ctx, func(ctx context.Context) {
		t := h.clk.NewTicker(h.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if ok, at := h.beat(ctx); ok {
				last = at
			} else if !at.Add(h.cfg.Interval).Before(last.Add(h.cfg.LeaseTTL)) {
				// Renewal keeps failing and the leases run out before the
				// next try (the ticker's next beat, an Interval after this
				// one began): stop handlers before another process is
				// allowed to take their tasks over.
				h.cfg.Lost(nil, true)
			}
		}
	})
}

// Stop stops renewing.
func (h *Heartbeat) Stop() { h.loop.Stop() }

// LeaseExpiresAt returns until when this process's lease on task id is
// known to hold, given claimed, the expiry its claim wrote: the later of
// claimed and the expiry of the last renewal that held the task.
func (h *Heartbeat) LeaseExpiresAt(id int64, claimed time.Time) time.Time {
	h.mu.Lock()
	renewed := h.renewed[id]
	h.mu.Unlock()
	if renewed.After(claimed) {
		return renewed
	}
	return claimed
}

// beat renews every lease held and reports whether it could, with the time
// the renewed leases count from: the time taken before the write, not after
// it, since a slow write does not make the leases last longer.
func (h *Heartbeat) beat(ctx context.Context) (bool, time.Time) {
	ids := h.cfg.Running()
	now := h.clk.Now()
	if len(ids) == 0 {
		h.setRenewed(nil, now)
		return true, now
	}
	expires := now.Add(h.cfg.LeaseTTL)
	held, err := h.cfg.Driver.Heartbeat(ctx, driver.HeartbeatParams{
		Owner: h.cfg.Owner, IDs: ids, Now: now, LeaseExpiresAt: expires,
	})
	h.checkLatency(now)
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Warn("keel: heartbeat failed", "error", err, "tasks", len(ids))
		}
		return false, now
	}
	h.setRenewed(held, expires)
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

// checkLatency warns when the renewal begun at start took more than half
// of the leases' margin, LeaseTTL - Interval: a renewal that takes the
// whole margin lands after the leases it renews ran out, and other
// processes rescue tasks this one still runs. The database's write
// latency (on SQLite, the file's write lock shared with other processes)
// is then too long for the lease. At most one warning a minute.
func (h *Heartbeat) checkLatency(start time.Time) {
	now := h.clk.Now()
	took, margin := now.Sub(start), h.cfg.LeaseTTL-h.cfg.Interval
	if took <= margin/2 || !h.warned.IsZero() && now.Sub(h.warned) < time.Minute {
		return
	}
	h.warned = now
	h.cfg.Logger.Warn("keel: lease renewal slow for the lease: the database took "+took.Round(time.Millisecond).String()+
		" of the "+margin.String()+" a renewal may take (lease TTL minus heartbeat interval); a slower one loses the leases of live tasks, which are then run again: raise the lease TTL",
		"took", took, "lease_ttl", h.cfg.LeaseTTL, "heartbeat_interval", h.cfg.Interval)
}

func (h *Heartbeat) setRenewed(held []int64, expires time.Time) {
	m := make(map[int64]time.Time, len(held))
	for _, id := range held {
		m[id] = expires
	}
	h.mu.Lock()
	h.renewed = m
	h.mu.Unlock()
}
