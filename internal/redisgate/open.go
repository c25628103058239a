package redisgate

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/internal/kerr"
)

// Settings are the client's Config.RedisGate, field for field.
type Settings struct {
	Client  redis.UniversalClient
	Prefix  string
	TTL     time.Duration
	Timeout time.Duration
	Wait    time.Duration
}

// Open checks s and returns a gate over s.Client in front of store. Bad
// settings are kerr.ErrInvalid errors naming the Config.RedisGate field.
func Open(s Settings, store Store, logger *slog.Logger) (*Gate, error) {
	if s.Client == nil {
		return nil, kerr.Invalid("Config.RedisGate.Client is required")
	}
	if s.TTL < 0 || s.Timeout < 0 || s.Wait < 0 {
		return nil, kerr.Invalid("Config.RedisGate: TTL, Timeout and Wait must not be negative")
	}
	if s.TTL != 0 && s.TTL < time.Millisecond {
		return nil, kerr.Invalid("Config.RedisGate.TTL must be at least 1ms, got %v", s.TTL)
	}
	return New(Config{Keys: NewRedisKeys(s.Client), Store: store, Prefix: s.Prefix,
		TTL: s.TTL, Timeout: s.Timeout, Wait: s.Wait, Logger: logger}), nil
}
