// Package leader elects one process per database to run maintenance,
// through a lease row that the leader renews and others may take once it
// expires.
package leader

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Name is the leadership keel's maintenance runs under.
const Name = "maintenance"

// Config wires an Elector.
type Config struct {
	Driver driver.Driver
	Owner  string
	TTL    time.Duration // lease length
	Now    func() time.Time
	Logger *slog.Logger
}

// Elector takes and keeps the leadership when it can.
type Elector struct {
	cfg     Config
	leading atomic.Bool
	loop    *service.Loop
}

// New returns an Elector.
func New(cfg Config) *Elector { return &Elector{cfg: cfg} }

// Leading reports whether this process held the lease at its last renewal.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Start campaigns every TTL/3.
func (e *Elector) Start(ctx context.Context) {
	e.loop = service.Start(ctx, func(ctx context.Context) {
		service.Every(ctx, e.cfg.TTL/3, e.campaign)
	})
}

func (e *Elector) campaign(ctx context.Context) {
	ok, err := e.cfg.Driver.Lead(ctx, driver.LeadParams{Name: Name, Owner: e.cfg.Owner, Now: e.cfg.Now(), TTL: e.cfg.TTL})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: leader election failed", "error", err)
		}
		ok = false
	}
	if was := e.leading.Swap(ok); was != ok {
		e.cfg.Logger.Info("keel: leadership changed", "node", e.cfg.Owner, "leading", ok)
	}
}

// Stop stops campaigning and hands the lease back so another process can
// take over at once.
func (e *Elector) Stop() {
	e.loop.Stop()
	if e.leading.Swap(false) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := e.cfg.Driver.Resign(ctx, Name, e.cfg.Owner); err != nil {
			e.cfg.Logger.Warn("keel: resign leadership failed", "error", err)
		}
	}
}
