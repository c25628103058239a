package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The live counters and history (migration 007) are written by triggers
// on keel_tasks; idempotency hits, which write no task, by countHits.
// Counts and Minutes read them, Reconcile checks them.

// countHits records the inserts of out that found their key held, in q's
// transaction.
func (d *Driver) countHits(ctx context.Context, q querier, now time.Time, out []driver.InsertResult) error {
	var queues, types []string
	for _, r := range out {
		if r.Duplicate {
			queues, types = append(queues, r.Task.Queue), append(types, r.Task.Type)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	if _, err := q.exec(ctx, d.sql.hits, []any{d.now(now), queues, types}); err != nil {
		return fmt.Errorf("count idempotency hits: %w", err)
	}
	return nil
}

// Reconcile implements driver.Driver: both counts are read in one
// repeatable-read transaction (one snapshot); the corrections, which
// commute with the triggers' concurrent additions, go to shard 0 in a
// second transaction that also folds the shards.
func (d *Driver) Reconcile(ctx context.Context, p driver.ReconcileParams) ([]driver.CountRow, error) {
	var truth, kept []driver.CountRow
	err := beginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			var err error
			if truth, err = sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: tx}, d.sql.trueCounts), sqlutil.ScanCountRow); err != nil {
				return err
			}
			kept, err = sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: tx}, d.sql.counts), sqlutil.ScanCountRow)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	diff := sqlutil.CountDiff(truth, kept)
	err = beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if len(diff) > 0 {
			var qs, ts, ks []string
			var ps []int32
			var dues, ns []int64
			for _, r := range diff {
				qs, ts, ks = append(qs, r.Queue), append(ts, r.Type), append(ks, r.Kind)
				ps, dues, ns = append(ps, int32(r.Priority)), append(dues, r.Due), append(ns, r.N)
			}
			if _, err := tx.Exec(ctx, d.sql.repairCounts, qs, ts, ks, ps, dues, ns); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, d.sql.foldShards); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, d.sql.dropZeroCounts); err != nil {
			return err
		}
		// The minutes before this one: writers are done with them, nearly
		// always (a fold is exact either way).
		if _, err := tx.Exec(ctx, d.sql.foldMinutes, driver.DueMinute(reconcileNow(p))); err != nil {
			return err
		}
		return sqlutil.DropMinutes(ctx, pgConn{q: pgxQuerier{db: tx}, d: d}, d.sql.dropMinutes, p)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	return diff, nil
}

// reconcileNow is p.Now, or the wall clock.
func reconcileNow(p driver.ReconcileParams) time.Time {
	if p.Now.IsZero() {
		return time.Now()
	}
	return p.Now
}
