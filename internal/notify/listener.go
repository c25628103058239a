// Package notify runs a driver's cross-process wake-ups (driver.Notifier,
// PostgreSQL's LISTEN/NOTIFY): a task committed by any process wakes this
// process's worker for its queue at once, and the poll becomes a fallback.
package notify

import (
	"context"
	"log/slog"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Config wires a Listener.
type Config struct {
	Notifier driver.Notifier
	Logger   *slog.Logger
	// Wake is called with a queue whose tasks became ready; "" means every
	// queue (the listener reconnected and may have missed notifications).
	Wake func(queue string)
}

// Listener is the wake-up service.
type Listener struct {
	cfg  Config
	loop *service.Loop
}

// New returns a Listener.
func New(cfg Config) *Listener { return &Listener{cfg: cfg} }

// Start listens until Stop.
func (l *Listener) Start(ctx context.Context) {
	l.loop = service.Start(ctx, func(ctx context.Context) {
		err := l.cfg.Notifier.Listen(ctx, driver.ListenParams{
			Wake: l.cfg.Wake,
			Error: func(err error) {
				l.cfg.Logger.Warn("keel: wake-up listener failed; polling meanwhile", "error", err)
			},
		})
		if err != nil && ctx.Err() == nil {
			l.cfg.Logger.Error("keel: wake-up listener ended; workers rely on polling", "error", err)
		}
	})
}

// Stop ends the listener and waits for it. It is safe on a nil Listener
// and on one never started.
func (l *Listener) Stop() {
	if l != nil {
		l.loop.Stop()
	}
}
