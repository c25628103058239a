package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConnSettings: the writer's and the readers' connections carry the
// pragmas Open asks for, whichever SQLite the build uses (the DSN is
// spelled differently for each, and mattn sets temp_store in a hook).
func TestConnSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "keel.db"), Options{Synchronous: SyncNormal, BusyTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pragmas := func(db *sql.DB) map[string]int {
		got := map[string]int{}
		for _, p := range []string{"busy_timeout", "synchronous", "foreign_keys", "temp_store", "query_only"} {
			var v int
			if err := db.QueryRowContext(ctx, `PRAGMA `+p).Scan(&v); err != nil {
				t.Fatalf("PRAGMA %s: %v", p, err)
			}
			got[p] = v
		}
		var mode string
		if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" {
			t.Errorf("journal_mode %s, want wal", mode)
		}
		return got
	}
	// synchronous 1 is NORMAL; temp_store 2 is MEMORY, 0 the default.
	for name, tc := range map[string]struct {
		db   *sql.DB
		want map[string]int
	}{
		"writer":  {d.wdb, map[string]int{"busy_timeout": 3000, "synchronous": 1, "foreign_keys": 1, "temp_store": 2, "query_only": 0}},
		"readers": {d.rdb, map[string]int{"busy_timeout": 3000, "synchronous": 1, "foreign_keys": 1, "temp_store": 0, "query_only": 1}},
	} {
		got := pragmas(tc.db)
		for p, want := range tc.want {
			if got[p] != want {
				t.Errorf("%s (%s): %s = %d, want %d", name, Build, p, got[p], want)
			}
		}
	}
}

// TestIsBusy: the error of a write that finds the write lock taken is
// read as SQLITE_BUSY, and another SQLite error is not.
func TestIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keel.db")
	holder, err := openDB(path, connSettings{journal: "WAL", immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `CREATE TABLE t (x INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, nil) // IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // only releases the lock
	other, err := openDB(path, connSettings{busy: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.ExecContext(ctx, `INSERT INTO t VALUES (1)`)
	if !isBusy(err) {
		t.Fatalf("write while another connection holds the lock: %v (%T), want SQLITE_BUSY", err, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO t VALUES (1), (1)`)
	if code, ok := errCode(err); !ok || code&0xff != 19 || isBusy(err) {
		t.Fatalf("duplicate key: %v, code %d %v; want SQLITE_CONSTRAINT (19), not busy", err, code, ok)
	}
}

// TestVersion names the SQLite release and the package of this build.
func TestVersion(t *testing.T) {
	t.Parallel()
	v := Version(context.Background())
	if !strings.HasPrefix(v, "SQLite 3.") || !strings.HasSuffix(v, "("+Build+")") {
		t.Fatalf("Version() = %q, want SQLite 3.x (%s)", v, Build)
	}
	t.Log(v)
}
