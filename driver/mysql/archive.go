package mysql

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
func (d *Driver) getArchived(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	return sqlutil.FindTask(sqlutil.Query(ctx, q, sqlGetArchived, id), sqlutil.ScanArchivedTaskUTC, "get archived task", id)
}

// archiveSQL are the archival statements of sqlutil.Ops. Archive locks
// the oldest succeeded, cancelled and dead tasks past their cutoff
// (skipping rows another transaction holds), copies them to keel_archive,
// deletes them from keel_tasks and takes them off the live counters. The
// cutoffs are taken relative to Now, so without Options.CallerClock they
// are as far before the database's now as they are before Now.
func (d *Driver) archiveSQL() sqlutil.ArchiveSQL[querier] {
	return sqlutil.ArchiveSQL[querier]{Purge: sqlPurgeArchive, Move: d.archiveMove}
}

func (d *Driver) archiveMove(ctx context.Context, tx querier, p driver.ArchiveParams, res *driver.ArchiveResult) error {
	now := d.now(p.Now)
	var ids []int64
	var tally sqlutil.Tally
	pick := map[driver.State]stmt{driver.StateSucceeded: sqlArchivePickSucceeded,
		driver.StateCancelled: sqlArchivePickCancelled, driver.StateDead: sqlArchivePickDead}
	err := sqlutil.ArchiveEach(p, res, func(state driver.State, before time.Time, left int) (int64, error) {
		s := pick[state]
		n := int64(len(ids))
		err := sqlutil.Query(ctx, tx, s.text, s.args(now, offset(before, p.Now), left)...)(func(scan sqlutil.Scan) error {
			var id int64
			o := sqlutil.RowState{State: state}
			if err := scan(&id, &o.Queue, &o.Type); err != nil {
				return err
			}
			ids = append(ids, id)
			tally.Delete(o)
			return nil
		})
		return int64(len(ids)) - n, err
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	// The rows are locked: every one is moved.
	cp := sqlArchiveCopy.with("{ids}", "?", len(ids), 1)
	if _, err := tx.ExecContext(ctx, cp.text, cp.args(now, idArgs(ids)...)...); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	del := sqlArchiveDelete.with("{ids}", "?", len(ids), 1)
	if _, err := tx.ExecContext(ctx, del.text, del.args(nil, idArgs(ids)...)...); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return count(ctx, tx, &tally)
}
