package keel

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

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

// TestRedisLogger: go-redis's own lines (many per burst when Redis hangs)
// are logged at most once a minute, saying how many were left out.
func TestRedisLogger(t *testing.T) {
	var buf strings.Builder
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := RedisLogger(slog.New(slog.NewTextHandler(&buf, nil))).(*redisLogger)
	l.now = func() time.Time { return now }
	for i := range 20 {
		l.Printf(t.Context(), "pool.go:%d: Conn has unread data", i)
		now = now.Add(time.Second)
	}
	now = now.Add(time.Minute)
	l.Printf(t.Context(), "pool.go:%d: Conn has unread data", 99)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "pool.go:0: Conn has unread data") ||
		!strings.Contains(lines[0], "left_out=0") || !strings.Contains(lines[1], "pool.go:99") ||
		!strings.Contains(lines[1], "left_out=19") || !strings.Contains(lines[1], "level=WARN") {
		t.Fatalf("logged:\n%s\nwant the first line, then the one a minute later with left_out=19", buf.String())
	}
	var _ interface {
		Printf(context.Context, string, ...any)
	} = l
	_ = func() { redis.SetLogger(l) } // it fits go-redis's logger (not set: it is global)
}
