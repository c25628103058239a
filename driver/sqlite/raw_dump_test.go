package sqlite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestDumpRawBench writes the input of bench/csqlite/claim_finish.py, which
// runs BenchmarkRawClaimFinish's statements through C SQLite: a database of
// 100,000 pending tasks made by this driver, and the claim and success
// statements' text. It runs only when asked:
//
//	KEEL_RAW_DUMP=/tmp/raw go test -run TestDumpRawBench ./driver/sqlite/
func TestDumpRawBench(t *testing.T) {
	dir := os.Getenv("KEEL_RAW_DUMP")
	if dir == "" {
		t.Skip("set KEEL_RAW_DUMP to a new directory to write the C SQLite comparison's input")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(dir, "keel.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ps := make([]driver.InsertParams, 1000)
	for i := range ps {
		ps[i] = driver.InsertParams{Queue: "default", Type: "bench", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, Now: now, PayloadDigest: "x"}
	}
	for range 100 {
		if _, err := d.Insert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(map[string]string{"claim": sqlClaim, "succeed": sqlSucceedMany}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "statements.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
