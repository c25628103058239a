// Package redisgate is the Redis first gate: a key set with SET NX in
// front of the database's idempotency check, so that duplicate
// submissions arriving together make one insert and are answered from
// the holder's task. It is an accelerator, never a guarantee: Redis
// failing or slow skips the gate, and the database's unique index always
// decides.
package redisgate

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/logevent"
	"github.com/keelq/keel/internal/service"
)

// Store is what a Gate needs of a driver: the task holding a key.
type Store interface {
	GetByKey(ctx context.Context, key string) (*driver.TaskRow, error)
}

// Config wires a Gate. Zero durations take their defaults.
type Config struct {
	Keys  Keys // Redis (NewRedisKeys)
	Store Store
	// Prefix is put before the stored idempotency key to make the gate's
	// key. Default "keel:gate:".
	Prefix string
	// TTL is how long a gate key lives. Default 10s.
	TTL time.Duration
	// Timeout bounds each call to Keys, in real time whatever Clock is.
	// Default 50ms.
	Timeout time.Duration
	// Wait is how long a submission that found the key held polls Store
	// for the holder's task. Default 500ms.
	Wait time.Duration
	// Clock paces the polls of Wait and the skip warnings; default the
	// wall clock.
	Clock  service.Clock
	Logger *slog.Logger
}

// Stats counts a Gate's decisions.
type Stats struct {
	// Acquired: submissions that set the gate key and inserted.
	Acquired int64
	// Hits: submissions answered from the holder's task, without a write.
	Hits int64
	// Skipped: submissions that inserted without the gate because Keys
	// failed or was too slow.
	Skipped int64
	// Fallbacks: submissions that found the key held but not the task
	// within Wait (or a task with another payload) and inserted.
	Fallbacks int64
}

// Gate is a client's Redis gate, with its counters.
type Gate struct {
	cfg                                Config
	clk                                service.Clock
	acquired, hits, skipped, fallbacks atomic.Int64
	warnMu                             sync.Mutex
	lastWarn                           time.Time
}

// New returns a Gate.
func New(cfg Config) *Gate {
	if cfg.Prefix == "" {
		cfg.Prefix = "keel:gate:"
	}
	setDefault(&cfg.TTL, 10*time.Second)
	setDefault(&cfg.Timeout, 50*time.Millisecond)
	setDefault(&cfg.Wait, 500*time.Millisecond)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gate{cfg: cfg, clk: service.Or(cfg.Clock, nil)}
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Stats returns the gate's counters.
func (g *Gate) Stats() Stats {
	return Stats{Acquired: g.acquired.Load(), Hits: g.hits.Load(), Skipped: g.skipped.Load(), Fallbacks: g.fallbacks.Load()}
}

// Insert inserts p, which has an idempotency key, through the gate: the
// submission that sets the key inserts with insert (and releases the key
// if that fails); one that finds it held answers the holder's task as a
// duplicate, or inserts when that does not appear within Wait; Keys
// failing or slower than Timeout skips the gate and inserts. It returns
// what insert returns, or the holder's task as a duplicate, or ctx's
// error when ctx ended first.
func (g *Gate) Insert(ctx context.Context, p driver.InsertParams, insert func([]driver.InsertParams) ([]driver.InsertResult, error)) ([]driver.InsertResult, error) {
	key := g.cfg.Prefix + p.IdemKey
	token := newToken()
	var ok bool
	err := g.call(ctx, func(rctx context.Context) (err error) {
		ok, err = g.cfg.Keys.SetNX(rctx, key, token, g.cfg.TTL)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		g.skip(err)
		return insert([]driver.InsertParams{p})
	}
	if ok {
		g.acquired.Add(1)
		out, err := insert([]driver.InsertParams{p})
		if err != nil {
			// Let the next submission try rather than wait for the TTL.
			_ = g.call(context.WithoutCancel(ctx), func(rctx context.Context) error {
				_, err := g.cfg.Keys.Release(rctx, key, token)
				return err
			})
		}
		return out, err
	}
	if row := g.wait(ctx, p); row != nil {
		g.hits.Add(1)
		return []driver.InsertResult{{Task: row, Duplicate: true}}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	g.fallbacks.Add(1)
	return insert([]driver.InsertParams{p})
}

// ErrTimeout is a call to Keys that did not answer within Timeout.
var ErrTimeout = errors.New("redis call exceeded the gate's Timeout")

// call runs one call to Keys bounded by Timeout: it returns fn's error,
// or ErrTimeout once Timeout has passed. go-redis only heeds a context's
// deadline with Options.ContextTimeoutEnabled, and otherwise waits out
// its read and pool timeouts (3 s and 4 s by default) on a hung server:
// then fn goes on in the background until go-redis gives up, and the
// caller does not wait for it (so the caller must not read what fn sets
// once call returned an error).
func (g *Gate) call(ctx context.Context, fn func(ctx context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- fn(rctx)
	}()
	select {
	case err := <-done:
		return err
	case <-rctx.Done():
		select { // an answer that came with the deadline counts
		case err := <-done:
			return err
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrTimeout
	}
}

// wait polls Store for the task holding p's key, for up to Wait, at
// pauses from 2ms doubling to 50ms. It returns nil when none appeared,
// Store failed, or the holder's payload differs (the insert then answers
// with the conflict).
func (g *Gate) wait(ctx context.Context, p driver.InsertParams) *driver.TaskRow {
	deadline := g.clk.Now().Add(g.cfg.Wait)
	pause := 2 * time.Millisecond
	for {
		row, err := g.cfg.Store.GetByKey(ctx, p.IdemKey)
		switch {
		case err == nil:
			if row.PayloadDigest != p.PayloadDigest {
				return nil
			}
			return row
		case !errors.Is(err, driver.ErrNotFound):
			return nil
		}
		left := deadline.Sub(g.clk.Now())
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-g.clk.After(min(pause, left)):
		}
		pause = min(pause*2, 50*time.Millisecond)
	}
}

// skip counts a skipped gate and logs it at most once a minute.
func (g *Gate) skip(err error) {
	n := g.skipped.Add(1)
	g.warnMu.Lock()
	defer g.warnMu.Unlock()
	if now := g.clk.Now(); g.lastWarn.IsZero() || now.Sub(g.lastWarn) >= time.Minute {
		g.lastWarn = now
		g.cfg.Logger.Warn("keel: Redis gate skipped, the database decides alone (logged at most once a minute)",
			slog.String(logevent.Error, err.Error()), slog.Int64("skipped_total", n))
	}
}
