package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The task queries beside the hot path (insert.go, claim.go, finish.go,
// leases.go): get, cancel, retry, list, steps and leadership. Their SQL is
// in queries.go.

// Get implements driver.Driver: keel_tasks first, then keel_archive.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	row, err := d.getWith(ctx, pgxQuerier{db: d.pool}, id)
	if err != nil {
		return nil, err
	}
	return row, nil
}

func (d *Driver) getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := d.one(ctx, q.byID(), d.sql.get, id)
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	if row == nil {
		// Not in keel_tasks: archived, or unknown. A task archived since
		// the first read is found by this later one.
		if row, err = d.getArchived(ctx, q.byID(), id); err != nil {
			return nil, err
		}
	}
	if row == nil {
		return nil, driver.ErrNotFound
	}
	return row, nil
}

// one returns the single task row a query yields, or nil.
func (d *Driver) one(ctx context.Context, q querier, query string, args ...any) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := q.query(ctx, query, args, func(scan func(...any) error) error {
		var err error
		row, err = sqlutil.ScanTaskUTC(scan)
		return err
	})
	return row, err
}

// Cancel implements driver.Driver.
func (d *Driver) Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	row, err := d.one(ctx, pgxQuerier{db: d.pool}.byID(), d.sql.cancel, d.now(now), id)
	return sqlutil.Changed(ctx, "cancel", id, row, err, d.Get)
}

// Retry implements driver.Driver.
func (d *Driver) Retry(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	row, err := d.retryNotify(ctx, now, id)
	if isUniqueViolation(err) {
		return nil, sqlutil.KeyTaken(id)
	}
	return sqlutil.Changed(ctx, "retry", id, row, err, d.Get)
}

// listSQL is List's query and arguments for p.
func (d *Driver) listSQL(p driver.Filter) (string, []any) {
	return sqlutil.ListQuery(d.sql.list, p, func(n int) string { return "$" + strconv.Itoa(n) },
		func(t time.Time) any { return t })
}

// Lead implements driver.Driver.
func (d *Driver) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	leading := false
	err := pgxQuerier{db: d.pool}.query(ctx, d.sql.lead, []any{d.now(p.Now), p.Name, p.Owner, p.TTL.Microseconds()},
		func(scan func(...any) error) error {
			var owner string
			leading = true
			return scan(&owner)
		})
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return leading, nil
}

// taskSQL are the task statements of sqlutil.Ops. List is planned for
// its values each time (DB.Lookup): a cached generic plan cannot tell a
// rare type or queue, best read on its index, from a common one, best read
// by walking the ids.
func (d *Driver) taskSQL() sqlutil.TaskSQL {
	return sqlutil.TaskSQL{ByKey: d.sql.byKey, Resign: d.sql.resign, Step: d.sql.saveStep, Scan: sqlutil.ScanTaskUTC, ListQuery: d.listSQL,
		StepArgs: func(p driver.StepParams) []any {
			return []any{d.now(p.Now), p.Name, string(p.Result), p.ID, p.Owner, p.Fence}
		}}
}
