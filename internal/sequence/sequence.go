// Package sequence settles sequences: tasks with the same sequence key run
// one at a time, in enqueue order. The driver holds each member behind the
// one before it and releases the next in the transaction that finishes a
// member (driver.Sequencer). Every other way a member ends (cancelled,
// dead-lettered by the rescuer, archived, purged) leaves its key waiting:
// the leader's Settler finds those keys every Interval and releases their
// next member, and once a minute forgets the keys no task uses any more.
package sequence

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
)

// Interval is how often the leader settles the sequences.
const Interval = time.Second

// PerPass bounds the keys one pass settles.
const PerPass = 500

// PruneEvery is how often the leader forgets idle keys, and IdleFor how
// long a key with no member left is kept after its last enqueue.
const (
	PruneEvery = time.Minute
	IdleFor    = 24 * time.Hour
)

// Store is what the Settler needs of the driver.
type Store interface {
	SettleSequences(ctx context.Context, now time.Time, limit int) (int, error)
	PruneSequences(ctx context.Context, before time.Time) (int64, error)
}

// Config configures a Settler.
type Config struct {
	Store Store
	Now   func() time.Time
	// Leading reports whether this process leads (nil: always).
	Leading func() bool
	Logger  *slog.Logger
	// Released is told how many members a pass released (nil: nobody).
	Released func(n int)
}

// Settler is the leader's pass over the sequences.
type Settler struct {
	cfg    Config
	pruned time.Time
}

// New returns a Settler for cfg.
func New(cfg Config) *Settler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Settler{cfg: cfg}
}

// Run is one pass as an engine loop runs it: while leading, errors logged.
func (s *Settler) Run(ctx context.Context) {
	if s.cfg.Leading != nil && !s.cfg.Leading() {
		return
	}
	if err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("keel: settling sequences failed; next try in one interval", "error", err)
	}
}

// RunOnce settles up to PerPass keys and, at most once per PruneEvery,
// forgets the keys idle for IdleFor.
func (s *Settler) RunOnce(ctx context.Context) error {
	now := s.cfg.Now()
	if now.Sub(s.pruned) >= PruneEvery {
		if _, err := s.cfg.Store.PruneSequences(ctx, now.Add(-IdleFor)); err != nil {
			return err
		}
		s.pruned = now
	}
	n, err := s.cfg.Store.SettleSequences(ctx, now, PerPass)
	if n > 0 {
		s.cfg.Logger.Debug("keel: sequences settled", "released", n)
		if s.cfg.Released != nil {
			s.cfg.Released(n)
		}
	}
	return err
}

var _ Store = driver.Sequencer(nil)
