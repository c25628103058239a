package redisgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keys holds the gate's keys: Redis (NewRedisKeys), or a fake in tests.
type Keys interface {
	// SetNX sets key to token for ttl unless key exists, and reports
	// whether it did.
	SetNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	// Release deletes key while it still holds token (a late release never
	// deletes a newer holder's key), and reports whether it did.
	Release(ctx context.Context, key, token string) (bool, error)
}

// NewRedisKeys returns the Keys of a Redis client (redis.NewClient,
// NewClusterClient, NewUniversalClient).
func NewRedisKeys(c redis.UniversalClient) Keys { return redisKeys{c} }

type redisKeys struct{ c redis.UniversalClient }

// release deletes the gate key only while it still holds our token.
var release = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func (r redisKeys) SetNX(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return r.c.SetNX(ctx, key, token, ttl).Result()
}

func (r redisKeys) Release(ctx context.Context, key, token string) (bool, error) {
	n, err := release.Run(ctx, r.c, []string{key}, token).Int()
	return n == 1, err
}

// newToken returns a random token that tells this submission's key from
// a later holder's.
func newToken() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}
