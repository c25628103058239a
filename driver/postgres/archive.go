package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
)

// Archival (migration 008): finished tasks past their retention move from
// keel_tasks to keel_archive; Get still finds them. Their SQL is in
// queries.go.

// Archive implements driver.Driver: in one transaction, one statement per
// state (succeeded, cancelled, dead, up to Limit in all) locks the oldest
// tasks past their cutoff, skipping rows another transaction holds,
// deletes them from keel_tasks and inserts them in keel_archive. The
// cutoffs are taken relative to Now, so without Options.CallerClock they
// are as far before the database's now as they are before Now.
func (d *Driver) Archive(ctx context.Context, p driver.ArchiveParams) (driver.ArchiveResult, error) {
	if err := p.Validate(); err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	var res driver.ArchiveResult
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		res = driver.ArchiveResult{}
		q := pgxQuerier{db: tx}.byID()
		classes := []struct {
			query  string
			before time.Time
			state  driver.State
			n      *int64
		}{
			{d.sql.archiveSucceeded, p.SucceededBefore, driver.StateSucceeded, &res.Succeeded},
			{d.sql.archiveCancelled, p.SucceededBefore, driver.StateCancelled, &res.Cancelled},
			{d.sql.archiveDead, p.DeadBefore, driver.StateDead, &res.Dead},
		}
		for _, c := range classes {
			left := int64(p.Limit) - res.Total()
			if c.before.IsZero() || left <= 0 {
				continue
			}
			n, err := q.exec(ctx, c.query, []any{d.now(p.Now), offset(c.before, p.Now), left})
			if err != nil {
				return fmt.Errorf("%s: %w", c.state, err)
			}
			*c.n = n
		}
		return nil
	})
	if err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	return res, nil
}

// PurgeArchive implements driver.Driver.
func (d *Driver) PurgeArchive(ctx context.Context, before time.Time, limit int) (int64, error) {
	if err := driver.ValidatePurgeArchive(before, limit); err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	n, err := pgxQuerier{db: d.pool}.byID().exec(ctx, d.sql.purgeArchive, []any{before, limit})
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	return n, nil
}

// getArchived reads an archived task, or returns nil.
func (d *Driver) getArchived(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := q.query(ctx, d.sql.getArchived, []any{id}, func(scan func(...any) error) error {
		var err error
		row, err = scanArchivedTask(scan)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get archived task %d: %w", id, err)
	}
	return row, nil
}
