package redisgate_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/internal/redisgate"
	"github.com/keelq/keel/internal/testdb"
)

// TestRedisKeys: SetNX sets a key once, for its TTL; a late release (token
// A, after the key expired and B set it) leaves B's key; B's own release
// deletes it.
func TestRedisKeys(t *testing.T) {
	testdb.Require(t, testdb.Redis)
	rdb := redis.NewClient(&redis.Options{Addr: testdb.RedisAddr()})
	defer rdb.Close()
	keys := redisgate.NewRedisKeys(rdb)
	ctx := t.Context()
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	key := "keeltest:keys:" + hex.EncodeToString(b[:])
	defer rdb.Del(ctx, key)

	if ok, err := keys.SetNX(ctx, key, "B", time.Minute); err != nil || !ok {
		t.Fatalf("first SetNX: %v, %v; want set", ok, err)
	}
	if ok, err := keys.SetNX(ctx, key, "C", time.Minute); err != nil || ok {
		t.Fatalf("second SetNX: %v, %v; want held", ok, err)
	}
	if ttl, err := rdb.PTTL(ctx, key).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL %v, %v; want at most a minute", ttl, err)
	}
	if ok, err := keys.Release(ctx, key, "A"); err != nil || ok {
		t.Fatalf("release with A: %v, %v; want not released", ok, err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "B" {
		t.Fatalf("after A's release the key holds %q, %v; want B", v, err)
	}
	if ok, err := keys.Release(ctx, key, "B"); err != nil || !ok {
		t.Fatalf("release with B: %v, %v; want released", ok, err)
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("after B's release: exists %d, %v", n, err)
	}
}
