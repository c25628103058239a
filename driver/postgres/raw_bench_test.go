package postgres_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
)

// BenchmarkRawClaimFinish is the drain's database work without keel around
// it: the driver's claim and success statements, 500 tasks each, one after
// the other, on b.N tasks inserted first, on one connection or on four at
// once ("x4"). "counted" runs them on keel's schema as it is; "bare" with
// the live counters' triggers disabled, which is what they cost. Compare
// with keel bench -n 100000 --dsn postgres://… in the same minutes:
//
//	go test -run '^$' -bench RawClaimFinish -benchtime 100000x ./driver/postgres/
func BenchmarkRawClaimFinish(b *testing.B) {
	for _, mode := range []struct {
		name  string
		bare  bool // the live counters' triggers disabled
		conns int
	}{{"counted", false, 1}, {"bare", true, 1}, {"counted-x4", false, 4}, {"bare-x4", true, 4}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			schema := testdb.PostgresSchema(b, "keel_raw")
			d, err := postgres.New(ctx, pool, postgres.Options{Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			now := time.Now()
			ps := make([]driver.InsertParams, 1000)
			for i := range ps {
				ps[i] = driver.InsertParams{Queue: "default", Type: "bench", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
					RunAt: now, Timeout: time.Minute, Now: now, PayloadDigest: "x"}
			}
			for done := 0; done < b.N; done += len(ps) {
				if _, err := d.Insert(ctx, ps[:min(len(ps), b.N-done)]); err != nil {
					b.Fatal(err)
				}
			}
			if mode.bare {
				if _, err := pool.Exec(ctx, "ALTER TABLE "+schema+".keel_tasks DISABLE TRIGGER USER"); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+schema+".keel_tasks"); err != nil {
				b.Fatal(err)
			}
			lease := time.Hour.Microseconds()
			var left atomic.Int64 // tasks not yet claimed
			left.Store(int64(b.N))
			b.ResetTimer()
			errs := make(chan error, mode.conns)
			var wg sync.WaitGroup
			for range mode.conns {
				wg.Go(func() { errs <- claimFinishLoop(ctx, d, &left, lease) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// claimFinishLoop claims and finishes tasks on one connection until left
// is used up.
func claimFinishLoop(ctx context.Context, d *postgres.Driver, left *atomic.Int64, lease int64) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for {
		n := min(500, left.Add(-500)+500)
		if n <= 0 {
			return nil
		}
		rows, err := conn.Query(ctx, d.ClaimSQL(), nil, "default", n, "node", lease)
		if err != nil {
			return err
		}
		var ids []int64
		var keys []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			id, fence := vals[0].(int64), vals[6].(int64)
			ids, keys = append(ids, id), append(keys, strconv.FormatInt(id, 10)+":"+strconv.FormatInt(fence, 10))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if int64(len(ids)) != n {
			return fmt.Errorf("claimed %d of %d", len(ids), n)
		}
		tag, err := conn.Exec(ctx, d.SucceedManySQL(), nil, ids, keys, "node")
		if err != nil {
			return err
		}
		if tag.RowsAffected() != n {
			return fmt.Errorf("finished %d of %d", tag.RowsAffected(), n)
		}
	}
}
