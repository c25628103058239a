// Package backlog samples the pending tasks for the peaks History
// reports. The history counts what happened in each minute, not how many
// tasks waited, so a burst that arrives and drains within a minute would
// not show without the samples: the leader reads the live counters every
// Interval and has the driver keep the largest pending count of each
// minute.
package backlog

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Interval is how often the leader samples: a burst that comes and goes
// within one interval can be missed.
const Interval = 5 * time.Second

// warnEvery is how many failed samples in a row make one warning: one a
// minute while sampling fails.
const warnEvery = int(time.Minute / Interval)

// Store is what a Sampler needs of a driver.
type Store interface {
	Counts(ctx context.Context) ([]driver.CountRow, error)
	RecordBacklog(ctx context.Context, s driver.BacklogSample) error
}

// Config wires a Sampler.
type Config struct {
	Driver Store
	// Retention is how long the history is kept (keel's
	// Config.HistoryRetention): older peaks are dropped once a minute.
	Retention time.Duration
	// Clock gives the sample's time; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the work: only the elected leader samples (nil:
	// always).
	Leading func() bool
	// Wrap turns a read's or write's error into the error returned (the
	// client marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Sampler is the backlog sampling service. Its RunOnce runs on one
// goroutine at a time.
type Sampler struct {
	cfg      Config
	clk      service.Clock
	dropped  int64 // the minute old peaks were last dropped in
	failures int   // failed samples in a row
}

// New returns a Sampler.
func New(cfg Config) *Sampler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Wrap == nil {
		cfg.Wrap = func(_ context.Context, err error) error { return err }
	}
	return &Sampler{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// RunOnce takes a sample while leading, and warns once a minute while
// sampling fails.
func (s *Sampler) RunOnce(ctx context.Context) {
	if s.cfg.Leading != nil && !s.cfg.Leading() {
		return
	}
	err := s.Sample(ctx)
	switch {
	case err == nil:
		s.failures = 0
	case ctx.Err() == nil:
		if s.failures%warnEvery == 0 {
			s.cfg.Logger.Warn("keel: sampling the backlog failed; retried every 5s", "error", err, "failures_in_a_row", s.failures+1)
		}
		s.failures++
	}
}

// Sample stores the pending tasks (ready, scheduled and retrying, every
// queue) as a sample of the current minute, read from the live counters,
// and drops the peaks older than Retention the first time it stores a
// sample in a minute.
func (s *Sampler) Sample(ctx context.Context) error {
	rows, err := s.cfg.Driver.Counts(ctx)
	if err != nil {
		return s.cfg.Wrap(ctx, err)
	}
	var pending int64
	for _, r := range rows {
		if r.Kind == string(driver.StatePending) || r.Kind == driver.KindRetrying {
			pending += r.N
		}
	}
	now := s.clk.Now()
	sample := driver.BacklogSample{Minute: driver.DueMinute(now), Pending: pending}
	if sample.Minute != s.dropped {
		sample.DropBefore = max(driver.DueMinute(now.Add(-s.cfg.Retention)), 0)
	}
	if err := s.cfg.Driver.RecordBacklog(ctx, sample); err != nil {
		return s.cfg.Wrap(ctx, err)
	}
	s.dropped = sample.Minute
	return nil
}
