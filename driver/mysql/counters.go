package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The live counters and history (migration 005): written by count at the
// end of every write transaction to keel_tasks, read by Counts and
// Minutes, checked by Reconcile.
//
// The counters are tallied in Go (sqlutil.Tally), so a write must know
// every instant it stores. Each write transaction reads the statement's
// now once (with a statement it runs anyway where one fits: the succeed
// pick, the locking read before a cancel or retry, the bulk picks) and
// passes it to its later statements; claims and inserts read the stored
// instants back with the rows.

// count writes what tally changed, in the transaction q, in key order (so
// that two writers never wait for each other in a cycle), to the writing
// connection's shard.
func count(ctx context.Context, q querier, tally *sqlutil.Tally) error {
	for _, st := range tally.Statements(sqlCountUpsert, countRow, sqlMinuteUpsert, minuteRow) {
		if _, err := q.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return fmt.Errorf("update live counters: %w", err)
		}
	}
	return nil
}

// txNow reads the now of a write transaction that has no statement to
// read it with: the caller's now with Options.CallerClock, else the
// database clock.
func (d *Driver) txNow(ctx context.Context, q querier, now time.Time) (time.Time, error) {
	if d.opts.CallerClock {
		return now, nil
	}
	var t time.Time
	err := sqlutil.Query(ctx, q, sqlNow.text, sqlNow.args(nil)...)(func(scan sqlutil.Scan) error { return scan(&t) })
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t.UTC(), nil
}

// countedTasks returns, by id, the tasks the transitions ts describe
// (Transition.Task), reading the running ones whose caller did not.
func (d *Driver) countedTasks(ctx context.Context, q querier, ts []driver.Transition) (map[int64]*driver.TaskRow, error) {
	out, missing := sqlutil.DescribedTasks(ts)
	if len(missing) == 0 {
		return out, nil
	}
	s := sqlCountedRows.with("{ids}", "?", len(missing), 1)
	err := sqlutil.Query(ctx, q, s.text, s.args(nil, idArgs(missing)...)...)(func(scan sqlutil.Scan) error {
		r := &driver.TaskRow{State: driver.StateRunning}
		var attempted *time.Time
		if err := scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Attempt, &r.RunAt, &attempted); err != nil {
			return err
		}
		r.RunAt, r.AttemptedAt = r.RunAt.UTC(), sqlutil.OptUTC(attempted)
		out[r.ID] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read finishing tasks: %w", err)
	}
	return out, nil
}

// Reconcile implements driver.Driver: both counts are read in one
// REPEATABLE READ snapshot; then one transaction locks the rows of
// connections that have ended (see liveShards), deletes them and adds
// their sums and the corrections to shard 0, drops zero rows of shard 0
// and old history.
func (d *Driver) Reconcile(ctx context.Context, p driver.ReconcileParams) ([]driver.CountRow, error) {
	var diff []driver.CountRow
	err := d.retry(ctx, func() error {
		tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // read only
		truth, err := sqlutil.Collect(sqlutil.Query(ctx, tx, sqlTrueCounts), sqlutil.ScanCountRow)
		if err != nil {
			return fmt.Errorf("count tasks: %w", err)
		}
		kept, err := sqlutil.Collect(sqlutil.Query(ctx, tx, sqlCounts), sqlutil.ScanCountRow)
		if err != nil {
			return err
		}
		diff = sqlutil.CountDiff(truth, kept)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		// The rows of ended connections (and zero rows of shard 0) no
		// writer holds now.
		live, err := liveShards(ctx, tx)
		if err != nil {
			return err
		}
		type shardRow struct {
			driver.CountRow
			shard int64
		}
		var locked []shardRow
		pick := sqlShardCounts.with("{live}", "?", len(live), 1)
		err = sqlutil.Query(ctx, tx, pick.text, pick.args(nil, shardArgs(live)...)...)(func(scan sqlutil.Scan) error {
			var r shardRow
			if err := scan(&r.Queue, &r.Type, &r.Kind, &r.Priority, &r.Due, &r.N, &r.shard); err != nil {
				return err
			}
			locked = append(locked, r)
			return nil
		})
		if err != nil {
			return err
		}
		// A connection opened since live was read may have written rows
		// the pick took: they stay.
		if live, err = liveShards(ctx, tx); err != nil {
			return err
		}
		var shards []driver.CountRow
		for _, r := range locked {
			if r.shard != 0 && live[r.shard] {
				continue
			}
			if _, err := tx.ExecContext(ctx, sqlDropCount, r.Queue, r.Type, r.Kind, r.Priority, r.Due, r.shard); err != nil {
				return err
			}
			shards = append(shards, r.CountRow)
		}
		// Their sums plus the corrections, into shard 0.
		fold := sqlutil.CountDiff(append(shards, diff...), nil)
		c := sqlutil.SQL(tx)
		if err := sqlutil.UpsertCountRows(ctx, c, sqlCountUpsert, countRowFolded, fold); err != nil {
			return err
		}
		now := p.Now
		if now.IsZero() {
			now = time.Now()
		}
		if err := foldMinutes(ctx, tx, driver.DueMinute(now), live); err != nil {
			return err
		}
		return sqlutil.DropMinutes(ctx, c, sqlDropMinutes, p)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	return diff, nil
}

// foldMinutes moves the history rows of ended connections (not in live,
// nor listed after the pick; see liveShards), of minutes before before,
// that no writer holds now into shard 0.
func foldMinutes(ctx context.Context, tx *sql.Tx, before int64, live map[int64]bool) error {
	var rows []driver.MinuteRow
	var shards []int64
	pick := sqlShardMinutes.with("{live}", "?", len(live), 1)
	err := sqlutil.Query(ctx, tx, pick.text, pick.args(nil, append(shardArgs(live), before)...)...)(func(scan sqlutil.Scan) error {
		var m driver.MinuteRow
		var shard int64
		if err := scan(&m.Minute, &m.Queue, &m.Type, &m.Enqueued, &m.Hits, &m.Attempts, &m.Ended, &m.Failed,
			&m.Succeeded, &m.Dead, &m.Cancelled, &m.DurationMS, &m.FirstMS, &m.LastMS, &shard); err != nil {
			return err
		}
		rows, shards = append(rows, m), append(shards, shard)
		return nil
	})
	if err != nil || len(rows) == 0 {
		return err
	}
	if live, err = liveShards(ctx, tx); err != nil {
		return err
	}
	var ended []driver.MinuteRow
	for i, m := range rows {
		if live[shards[i]] {
			continue // opened since the pick's list: it stays
		}
		if _, err := tx.ExecContext(ctx, sqlDropMinute, m.Minute, m.Queue, m.Type, shards[i]); err != nil {
			return err
		}
		ended = append(ended, m)
	}
	if len(ended) == 0 {
		return nil
	}
	fold := sqlutil.MergeMinutes(ended)
	text := strings.Replace(sqlMinuteUpsert, "{rows}", sqlutil.Repeat(minuteRowFolded, len(fold)), 1)
	_, err = tx.ExecContext(ctx, text, sqlutil.MinuteArgs(fold)...)
	return err
}

// liveShards returns the connections the server lists now: the shards
// Reconcile must not fold. A connection's counter and history rows are
// deleted only once it has ended, when no transaction can write them
// again. Deleting a live connection's rows made callers' transactions
// deadlock (error 1213): a counter upsert that waited for a row Reconcile
// was deleting kept its lock as a gap lock on the next row when purge
// removed the row (at READ COMMITTED too: InnoDB keeps the X locks of
// INSERT … ON DUPLICATE KEY UPDATE), so upserts on several connections
// each held the gap the others had to insert their rows into. The
// driver's own transactions run again after a deadlock; a caller's
// (CompleteTx, EnqueueTx) cannot. TestCompleteTxConcurrentWithReconcile.
//
// A server lists other accounts' connections only to an account with the
// PROCESS privilege: the rows of a live connection it does not list are
// folded all the same. The connection running Reconcile is always
// listed, so the list is never empty.
func liveShards(ctx context.Context, q querier) (map[int64]bool, error) {
	live := map[int64]bool{}
	err := sqlutil.Query(ctx, q, sqlLiveShards)(func(scan sqlutil.Scan) error {
		var id int64
		if err := scan(&id); err != nil {
			return err
		}
		live[id] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	if len(live) == 0 {
		return nil, errors.New("list connections: information_schema.PROCESSLIST is empty")
	}
	return live, nil
}

// shardArgs is live as the arguments of a {live} list.
func shardArgs(live map[int64]bool) []any {
	out := make([]any, 0, len(live))
	for id := range live {
		out = append(out, id)
	}
	return out
}
