package redisgate

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Logger logs go-redis's own lines (pool and connection troubles) at
// WARN at most once a minute, with how many lines were left out since: a
// hung or restarting Redis makes go-redis print many of them per burst.
// It fits redis.SetLogger.
type Logger struct {
	log     *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	last    time.Time
	dropped int64
}

// NewLogger returns a Logger writing to logger (nil: slog.Default()) and
// reading the time from now (nil: time.Now).
func NewLogger(logger *slog.Logger, now func() time.Time) *Logger {
	if logger == nil {
		logger = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &Logger{log: logger, now: now}
}

// Printf logs one go-redis line, unless one was logged less than a minute
// ago.
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < time.Minute {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	l.log.WarnContext(ctx, "keel: go-redis: "+fmt.Sprintf(format, v...)+" (go-redis lines are logged at most once a minute)",
		slog.Int64("left_out", dropped))
}
