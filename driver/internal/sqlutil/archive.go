package sqlutil

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// ArchiveSQL are a driver's archival statements: Move takes what Archive
// moves from keel_tasks to keel_archive in the transaction q, adding it to
// res (see ArchiveEach); Purge (before, limit) deletes archived tasks
// finished before a time.
type ArchiveSQL[Q any] struct {
	Move  func(ctx context.Context, q Q, p driver.ArchiveParams, res *driver.ArchiveResult) error
	Purge string
}

// ArchiveEach runs take for each state Archive moves, in order
// (succeeded, cancelled, dead), with the state's cutoff and how many
// tasks p.Limit leaves, and adds what it took to res. A state without a
// cutoff, or with nothing left, is skipped.
func ArchiveEach(p driver.ArchiveParams, res *driver.ArchiveResult,
	take func(state driver.State, before time.Time, left int) (int64, error)) error {
	for _, c := range []struct {
		state  driver.State
		before time.Time
		n      *int64
	}{
		{driver.StateSucceeded, p.SucceededBefore, &res.Succeeded},
		{driver.StateCancelled, p.SucceededBefore, &res.Cancelled},
		{driver.StateDead, p.DeadBefore, &res.Dead},
	} {
		left := int64(p.Limit) - res.Total()
		if c.before.IsZero() || left <= 0 {
			continue
		}
		n, err := take(c.state, c.before, int(left))
		if err != nil {
			return fmt.Errorf("%s: %w", c.state, err)
		}
		*c.n += n
	}
	return nil
}

// Archive implements driver.Driver: in one transaction, it moves the
// oldest succeeded, cancelled and dead tasks past their cutoff (in that
// order, up to Limit in all) to keel_archive (see the driver's Move).
func (o *Ops[Q]) Archive(ctx context.Context, p driver.ArchiveParams) (driver.ArchiveResult, error) {
	if err := p.Validate(); err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	var res driver.ArchiveResult
	err := o.c.DB.Write(ctx, func(q Q) error {
		res = driver.ArchiveResult{}
		return o.c.SQL.Archive.Move(ctx, q, p, &res)
	})
	if err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	return res, nil
}

// PurgeArchive implements driver.Driver.
func (o *Ops[Q]) PurgeArchive(ctx context.Context, before time.Time, limit int) (int64, error) {
	if err := driver.ValidatePurgeArchive(before, limit); err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Archive.Purge, o.c.DB.Time(before), limit)
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	return n, nil
}
