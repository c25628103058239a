package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// BenchmarkRawClaimFinish is the reference for `keel bench -n` on SQLite:
// the driver's own claim and batched-success statements, 500 tasks per
// transaction each, run straight through database/sql on one connection
// with synchronous=FULL, with no engine, no handlers, no live counters
// and no group commit around them: the most this schema's SQL gives on
// this machine through this SQLite. It reports tasks/s (claimed and
// finished); each iteration is one task.
//
//	go test -run '^$' -bench RawClaimFinish -benchtime 100000x ./driver/sqlite/
func BenchmarkRawClaimFinish(b *testing.B) {
	path := filepath.Join(b.TempDir(), "keel.db")
	writeBenchTasks(b, path, b.N)
	now := time.Now()
	db, err := openDB(path, connSettings{journal: "WAL", sync: SyncFull, tempMemory: true, immediate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	lease := now.Add(time.Hour)
	b.ResetTimer()
	for done := 0; done < b.N; {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		rows, err := tx.Query(sqlClaim, "node", micros(lease), micros(time.Now()), "default", min(500, b.N-done))
		if err != nil {
			b.Fatal(err)
		}
		var ids []int64
		var pairs [][2]int64
		for rows.Next() {
			var r driver.TaskRow
			var runAt, timeoutMS, createdAt int64
			if err := rows.Scan(&r.ID, &r.Type, &r.Priority, &r.Payload, &r.Attempt, &r.MaxAttempts,
				&r.Fence, &runAt, &timeoutMS, &createdAt, &r.Snoozes, &r.Meta); err != nil {
				b.Fatal(err)
			}
			ids, pairs = append(ids, r.ID), append(pairs, [2]int64{r.ID, r.Fence})
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		if len(ids) == 0 {
			b.Fatal("nothing left to claim")
		}
		tx, err = db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		res, err := tx.Exec(sqlSucceedMany, micros(time.Now()), int64List(ids), pairList(pairs), "node")
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != int64(len(ids)) {
			b.Fatalf("finished %d of %d", n, len(ids))
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		done += len(ids)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// writeBenchTasks makes the database at path with at least n pending no-op
// tasks of queue default (in inserts of 1,000), as keel bench stores them.
func writeBenchTasks(tb testing.TB, path string, n int) {
	tb.Helper()
	ctx := context.Background()
	d, err := Open(ctx, path, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	ps := make([]driver.InsertParams, 1000)
	for i := range ps {
		ps[i] = driver.InsertParams{Queue: "default", Type: "bench", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, Now: now, PayloadDigest: "x"}
	}
	for done := 0; done < n; done += len(ps) {
		if _, err := d.Insert(ctx, ps); err != nil {
			tb.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		tb.Fatal(err)
	}
}
