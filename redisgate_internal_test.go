package keel

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/internal/testdb"
)

// TestRedisGateRelease: a late release (token A, after the key expired and
// B set it) leaves B's key; B's own release deletes it.
func TestRedisGateRelease(t *testing.T) {
	testdb.Require(t, testdb.Redis)
	rdb := redis.NewClient(&redis.Options{Addr: testdb.RedisAddr()})
	defer rdb.Close()
	ctx := t.Context()
	key := "keeltest:release:" + newGateToken()
	if err := rdb.Set(ctx, key, "B", 0).Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Del(ctx, key)
	if n, err := redisRelease.Run(ctx, rdb, []string{key}, "A").Int(); err != nil || n != 0 {
		t.Fatalf("release with A: %d, %v; want 0", n, err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "B" {
		t.Fatalf("after A's release the key holds %q, %v; want B", v, err)
	}
	if n, err := redisRelease.Run(ctx, rdb, []string{key}, "B").Int(); err != nil || n != 1 {
		t.Fatalf("release with B: %d, %v; want 1", n, err)
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("after B's release: exists %d, %v", n, err)
	}
}
