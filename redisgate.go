package keel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/logevent"
)

// RedisGate configures the Redis first gate (Config.RedisGate): an
// accelerator in front of the database's idempotency check, never a
// guarantee. Before a single task with an idempotency key (UniqueBy,
// IdempotencyKey) is inserted by Enqueue or EnqueueMany, the client sets
// Prefix+key in Redis with SET NX PX TTL. The submission that sets it
// inserts as without the gate and keeps the key for its TTL, so that
// later duplicates are answered cheaply; its insert failing releases the
// key with a compare-and-delete script (a late release never deletes a
// newer holder's key). A submission that finds the key held looks the
// task up by its key (one indexed read, no write) and answers it as a
// duplicate; while the holder has not committed yet it polls for up to
// Wait, then inserts as usual (so does a resubmission within the TTL of a
// task that died or was cancelled, which released its key in the
// database but not in Redis). Redis unreachable, slow (Timeout) or
// failing skips the gate: the submission inserts as usual (logged at
// WARN at most once a minute, counted in RedisGateStats). In every case
// the database's unique index still decides, so the gate changes how
// many inserts reach the database, never the answer. Not applied to
// EnqueueTx and EnqueueManyTx (the gate cannot see the caller's commit)
// nor to EnqueueMany with more than one task.
type RedisGate struct {
	// Client is the Redis client (redis.NewClient, NewClusterClient,
	// NewUniversalClient). Required.
	Client redis.UniversalClient
	// Prefix is put before the stored idempotency key to make the Redis
	// key. Default "keel:gate:".
	Prefix string
	// TTL is how long a gate key lives: the window in which duplicates are
	// answered without an insert. Default 10s.
	TTL time.Duration
	// Timeout bounds each Redis call; a slower answer skips the gate.
	// Default 50ms.
	Timeout time.Duration
	// Wait is how long a submission that found the key held polls the
	// database for the holder's task before inserting itself. Default
	// 500ms.
	Wait time.Duration
}

// RedisGateStats counts the Redis gate's decisions since the client was
// made.
type RedisGateStats struct {
	// Enabled: the client has a gate (Config.RedisGate).
	Enabled bool
	// Acquired: submissions that set the gate key and inserted.
	Acquired int64
	// Hits: submissions answered from the holder's task, without a write.
	Hits int64
	// Skipped: submissions that inserted without the gate because Redis
	// failed or was too slow.
	Skipped int64
	// Fallbacks: submissions that found the key held but not the task
	// within Wait (or a task with another payload) and inserted.
	Fallbacks int64
}

// redisRelease deletes the gate key only while it still holds our token.
var redisRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

// gate is a client's Redis gate, with its counters.
type gate struct {
	cfg                                RedisGate
	acquired, hits, skipped, fallbacks atomic.Int64
	warnMu                             sync.Mutex
	lastWarn                           time.Time
}

func newGate(cfg RedisGate) (*gate, error) {
	if cfg.Client == nil {
		return nil, invalid("Config.RedisGate.Client is required")
	}
	if cfg.TTL < 0 || cfg.Timeout < 0 || cfg.Wait < 0 {
		return nil, invalid("Config.RedisGate: TTL, Timeout and Wait must not be negative")
	}
	if cfg.TTL != 0 && cfg.TTL < time.Millisecond {
		return nil, invalid("Config.RedisGate.TTL must be at least 1ms, got %v", cfg.TTL)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "keel:gate:"
	}
	setDefault(&cfg.TTL, 10*time.Second)
	setDefault(&cfg.Timeout, 50*time.Millisecond)
	setDefault(&cfg.Wait, 500*time.Millisecond)
	return &gate{cfg: cfg}, nil
}

// RedisGateStats returns the Redis gate's counters (zero without a gate).
func (c *Client) RedisGateStats() RedisGateStats {
	g := c.gate
	if g == nil {
		return RedisGateStats{}
	}
	return RedisGateStats{Enabled: true, Acquired: g.acquired.Load(), Hits: g.hits.Load(),
		Skipped: g.skipped.Load(), Fallbacks: g.fallbacks.Load()}
}

// gateInsert inserts p through the gate. It returns what insert returns,
// or the holder's task as a duplicate when the gate answered.
func (c *Client) gateInsert(ctx context.Context, p driver.InsertParams, insert func([]driver.InsertParams) ([]driver.InsertResult, error)) ([]driver.InsertResult, error) {
	g := c.gate
	key := g.cfg.Prefix + p.IdemKey
	token := newGateToken()
	var ok bool
	err := g.call(ctx, func(rctx context.Context) (err error) {
		ok, err = g.cfg.Client.SetNX(rctx, key, token, g.cfg.TTL).Result()
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.gateSkipped(err)
		return insert([]driver.InsertParams{p})
	}
	if ok {
		g.acquired.Add(1)
		out, err := insert([]driver.InsertParams{p})
		if err != nil {
			// Let the next submission try rather than wait for the TTL.
			_ = g.call(context.WithoutCancel(ctx), func(rctx context.Context) error {
				return redisRelease.Run(rctx, g.cfg.Client, []string{key}, token).Err()
			})
		}
		return out, err
	}
	if row := c.gateWait(ctx, p); row != nil {
		g.hits.Add(1)
		return []driver.InsertResult{{Task: row, Duplicate: true}}, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	g.fallbacks.Add(1)
	return insert([]driver.InsertParams{p})
}

// errGateTimeout is a Redis call that did not answer within Timeout.
var errGateTimeout = errors.New("redis call exceeded the gate's Timeout")

// call runs one Redis call bounded by Timeout: it returns fn's error, or
// errGateTimeout once Timeout has passed. go-redis only heeds a context's
// deadline with Options.ContextTimeoutEnabled, and otherwise waits out its
// read and pool timeouts (3 s and 4 s by default) on a hung server: then
// fn goes on in the background until go-redis gives up, and the caller
// does not wait for it (so the caller must not read what fn sets once call
// returned an error).
func (g *gate) call(ctx context.Context, fn func(ctx context.Context) error) error {
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
		return errGateTimeout
	}
}

// gateWait polls the database for the task holding p's key, for up to
// Wait. It returns nil when none appeared or the holder's payload differs
// (the insert then answers with the conflict).
func (c *Client) gateWait(ctx context.Context, p driver.InsertParams) *driver.TaskRow {
	deadline := time.Now().Add(c.gate.cfg.Wait)
	pause := 2 * time.Millisecond
	for {
		row, err := c.drv.GetByKey(ctx, p.IdemKey)
		switch {
		case err == nil:
			if row.PayloadDigest != p.PayloadDigest {
				return nil
			}
			return row
		case !errors.Is(err, driver.ErrNotFound):
			return nil
		}
		if time.Until(deadline) <= 0 {
			return nil
		}
		t := time.NewTimer(min(pause, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		pause = min(pause*2, 50*time.Millisecond)
	}
}

// gateSkipped counts a skipped gate and logs it at most once a minute.
func (c *Client) gateSkipped(err error) {
	g := c.gate
	n := g.skipped.Add(1)
	g.warnMu.Lock()
	defer g.warnMu.Unlock()
	if now := time.Now(); now.Sub(g.lastWarn) >= time.Minute {
		g.lastWarn = now
		c.cfg.Logger.Warn("keel: Redis gate skipped, the database decides alone (logged at most once a minute)",
			slog.String(logevent.Error, err.Error()), slog.Int64("skipped_total", n))
	}
}

func newGateToken() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// RedisLogger returns a logger for go-redis's own log lines (pool and
// connection troubles), to pass to redis.SetLogger: a hung or restarting
// Redis makes go-redis print many of them per burst, which this logs
// through logger at WARN at most once a minute, with how many lines were
// left out since. keel serve sets it; go-redis's default prints every line
// to stderr.
func RedisLogger(logger *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	if logger == nil {
		logger = slog.Default()
	}
	return &redisLogger{log: logger, now: time.Now}
}

type redisLogger struct {
	log     *slog.Logger
	now     func() time.Time
	mu      sync.Mutex
	last    time.Time
	dropped int64
}

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
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
