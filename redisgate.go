package keel

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/internal/redisgate"
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

// RedisGateStats returns the Redis gate's counters (zero without a gate).
func (c *Client) RedisGateStats() RedisGateStats {
	if c.gate == nil {
		return RedisGateStats{}
	}
	s := c.gate.Stats()
	return RedisGateStats{Enabled: true, Acquired: s.Acquired, Hits: s.Hits, Skipped: s.Skipped, Fallbacks: s.Fallbacks}
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
	return redisgate.NewLogger(logger, nil)
}
