package sqlite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
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
	writeBenchTasks(t, filepath.Join(dir, "keel.db"), 100000)
	b, err := json.MarshalIndent(map[string]string{"claim": sqlClaim, "succeed": sqlSucceedMany}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "statements.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
