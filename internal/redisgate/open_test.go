package redisgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/redisgate"
)

func TestOpen(t *testing.T) {
	// Never dialled: Open only checks the settings.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { client.Close() })
	for _, tc := range []struct {
		name string
		s    redisgate.Settings
		want string // "" when accepted
	}{
		{"defaults", redisgate.Settings{Client: client}, ""},
		{"all set", redisgate.Settings{Client: client, Prefix: "p:", TTL: time.Millisecond, Timeout: time.Second, Wait: time.Second}, ""},
		{"no client", redisgate.Settings{}, "Config.RedisGate.Client is required"},
		{"negative TTL", redisgate.Settings{Client: client, TTL: -1}, "Config.RedisGate: TTL, Timeout and Wait must not be negative"},
		{"negative Timeout", redisgate.Settings{Client: client, Timeout: -1}, "Config.RedisGate: TTL, Timeout and Wait must not be negative"},
		{"negative Wait", redisgate.Settings{Client: client, Wait: -time.Second}, "Config.RedisGate: TTL, Timeout and Wait must not be negative"},
		{"TTL under 1ms", redisgate.Settings{Client: client, TTL: time.Microsecond}, "Config.RedisGate.TTL must be at least 1ms, got 1µs"},
	} {
		g, err := redisgate.Open(tc.s, &store{}, nil)
		if tc.want == "" {
			if err != nil || g == nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, kerr.ErrInvalid) || err.Error() != kerr.ErrInvalid.Error()+": "+tc.want {
			t.Errorf("%s: %v, want ErrInvalid %q", tc.name, err, tc.want)
		}
	}
}
