package redisgate_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keelq/keel/internal/redisgate"
)

// TestLogger: go-redis's own lines (many per burst when Redis hangs) are
// logged at most once a minute, saying how many were left out.
func TestLogger(t *testing.T) {
	var buf strings.Builder
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := redisgate.NewLogger(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
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
