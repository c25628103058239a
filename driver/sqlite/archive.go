package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Archival (migration 006): finished tasks past their retention move from
// keel_tasks to keel_archive; Get still finds them. Their SQL is in
// queries.go.

// getArchived reads an archived task, or returns driver.ErrNotFound.
func getArchived(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	return sqlutil.FindTask(sqlutil.Query(ctx, q, sqlGetArchived, id), func(scan sqlutil.Scan) (*driver.TaskRow, error) {
		return sqlutil.ScanArchivedTask(scan, fromMicros, optTime)
	}, "get archived task", id)
}

// archiveSQL are the archival statements of sqlutil.Ops. Archive runs in
// one write of the single writer: it picks the oldest succeeded, cancelled
// and dead tasks past their cutoff, copies them to keel_archive, deletes
// them from keel_tasks and takes them off the live counters.
var archiveSQL = sqlutil.ArchiveSQL[querier]{Purge: sqlPurgeArchive,
	Move: func(ctx context.Context, tx querier, p driver.ArchiveParams, res *driver.ArchiveResult) error {
		var ids []int64
		var tally sqlutil.Tally
		pick := map[driver.State]string{driver.StateSucceeded: sqlArchivePickSucceeded,
			driver.StateCancelled: sqlArchivePickCancelled, driver.StateDead: sqlArchivePickDead}
		err := sqlutil.ArchiveEach(p, res, func(state driver.State, before time.Time, left int) (int64, error) {
			return archivePick(sqlutil.Query(ctx, tx, pick[state], micros(before), left), state, &ids, &tally)
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		list := int64List(ids)
		if _, err := tx.ExecContext(ctx, sqlArchiveCopy, list, micros(p.Now)); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		if _, err := tx.ExecContext(ctx, sqlArchiveDelete, list); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return count(ctx, tx, &tally)
	}}

// archivePick reads the id, queue and type of each task a pick of state
// selects, adds its id to ids and takes it off the counters in tally.
func archivePick(rows sqlutil.Rows, state driver.State, ids *[]int64, tally *sqlutil.Tally) (int64, error) {
	var n int64
	err := rows(func(scan sqlutil.Scan) error {
		var id int64
		o := sqlutil.RowState{State: state}
		if err := scan(&id, &o.Queue, &o.Type); err != nil {
			return err
		}
		*ids = append(*ids, id)
		n++
		tally.Delete(o)
		return nil
	})
	return n, err
}
