package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Archival (migration 008): finished tasks past their retention move from
// keel_tasks to keel_archive; Get still finds them. Their SQL is in
// queries.go.

// getArchived reads an archived task, or returns nil.
func (d *Driver) getArchived(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := q.query(ctx, d.sql.getArchived, []any{id}, func(scan func(...any) error) error {
		var err error
		row, err = sqlutil.ScanArchivedTaskUTC(scan)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get archived task %d: %w", id, err)
	}
	return row, nil
}

// archiveSQL are the archival statements of sqlutil.Ops. Archive runs one
// statement per state (succeeded, cancelled, dead, up to Limit in all):
// it locks the oldest tasks past their cutoff, skipping rows another
// transaction holds, deletes them from keel_tasks and inserts them in
// keel_archive. The cutoffs are taken relative to Now, so without
// Options.CallerClock they are as far before the database's now as they
// are before Now.
func (d *Driver) archiveSQL() sqlutil.ArchiveSQL[querier] {
	move := map[driver.State]string{driver.StateSucceeded: d.sql.archiveSucceeded,
		driver.StateCancelled: d.sql.archiveCancelled, driver.StateDead: d.sql.archiveDead}
	return sqlutil.ArchiveSQL[querier]{Purge: d.sql.purgeArchive,
		Move: func(ctx context.Context, q querier, p driver.ArchiveParams, res *driver.ArchiveResult) error {
			return sqlutil.ArchiveEach(p, res, func(state driver.State, before time.Time, left int) (int64, error) {
				return q.byID().exec(ctx, move[state], []any{d.now(p.Now), offset(before, p.Now), left})
			})
		}}
}
