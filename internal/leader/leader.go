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

// Lease is what an Elector needs of a driver.
type Lease interface {
	Lead(ctx context.Context, params driver.LeadParams) (bool, error)
	Resign(ctx context.Context, name, owner string) error
}

// Config wires an Elector.
type Config struct {
	Driver Lease
	Owner  string
	TTL    time.Duration // lease length; the Elector campaigns every TTL/3
	// Clock paces the campaigns; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// OnLead, when set, is called each time this process becomes the
	// leader, from the campaign loop: it must not block. Maintenance that
	// would otherwise wait for its next interval starts from it.
	OnLead func()
}

// Elector takes and keeps the leadership when it can.
type Elector struct {
	cfg     Config
	clk     service.Clock
	leading atomic.Bool
	loop    *service.Loop
}

// New returns an Elector.
func New(cfg Config) *Elector {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// Leading reports whether this process held the lease at its last renewal.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Start campaigns at once, then every TTL/3.
func (e *Elector) Start(ctx context.Context) {
	e.loop = service.Start(ctx, func(ctx context.Context) {
		service.EveryOn(ctx, e.clk, e.cfg.TTL/3, e.campaign)
	})
}

func (e *Elector) campaign(ctx context.Context) {
	ok, err := e.cfg.Driver.Lead(ctx, driver.LeadParams{Name: Name, Owner: e.cfg.Owner, Now: e.clk.Now(), TTL: e.cfg.TTL})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: leader election failed", "error", err)
		}
		ok = false
	}
	if was := e.leading.Swap(ok); was != ok {
		e.cfg.Logger.Info("keel: leadership changed", "node", e.cfg.Owner, "leading", ok)
		if ok && e.cfg.OnLead != nil {
			e.cfg.OnLead()
		}
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
