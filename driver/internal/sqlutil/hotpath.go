package sqlutil

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// The skeletons of the drivers' hot-path methods (Insert, Claim, Finish,
// the leases): each driver runs its own statements inside them.

// ClaimSorted runs claim for p's type filter (see ClaimTypes) and sorts
// what it claimed (driver.SortClaimed); it claims nothing when no type is
// left to claim.
func ClaimSorted(p driver.ClaimParams, claim func(include, exclude []string) ([]driver.TaskRow, error)) ([]driver.TaskRow, error) {
	include, exclude, ok := ClaimTypes(p)
	if !ok {
		return nil, nil // no type to claim
	}
	out, err := claim(include, exclude)
	if err != nil {
		return nil, err
	}
	driver.SortClaimed(out)
	return out, nil
}

// SplitFinish calls plain for each transition of ts that PlainSuccess
// lets a driver finish together with the others like it, in one
// statement, and returns the rest, each finished on its own.
func SplitFinish(ts []driver.Transition, plain func(t driver.Transition)) (others []driver.Transition) {
	for _, t := range ts {
		if PlainSuccess(t) {
			plain(t)
		} else {
			others = append(others, t)
		}
	}
	return others
}

// InsertSavepointed runs insert under a savepoint of the caller's
// transaction c (see InsertSavepoint) and returns what it inserted.
func InsertSavepointed(ctx context.Context, c Conn, insert func() ([]driver.InsertResult, error)) ([]driver.InsertResult, error) {
	var out []driver.InsertResult
	err := InsertSavepoint(ctx, func(ctx context.Context, q string) error {
		_, err := c.Exec(ctx, q)
		return err
	}, func() error {
		var err error
		out, err = insert()
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RescueIDs are the ids of the tasks p rescues.
func RescueIDs(p driver.RescueParams) []int64 {
	ids := make([]int64, len(p.Tasks))
	for i, rt := range p.Tasks {
		ids[i] = rt.Transition.ID
	}
	return ids
}

// ScanExpired reads one row of id, queue, type, priority, attempt,
// max_attempts, fence, run_at, lease_owner, lease_expires_at,
// attempted_at and then extra: a running task whose lease expired. T is
// how the database hands over a timestamp and N one that may be NULL; at
// and opt turn them into UTC times (opt gives the zero time for NULL).
func ScanExpired[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time, extra ...any) (*driver.TaskRow, error) {
	r := driver.TaskRow{State: driver.StateRunning}
	var (
		runAt              T
		owner              sql.NullString
		expires, attempted N
	)
	if err := scan(append([]any{&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Attempt, &r.MaxAttempts, &r.Fence, &runAt,
		&owner, &expires, &attempted}, extra...)...); err != nil {
		return nil, err
	}
	r.RunAt, r.LeaseOwner = at(runAt), owner.String
	r.LeaseExpiresAt, r.AttemptedAt = opt(expires), opt(attempted)
	return &r, nil
}

// ListExpired reads the running tasks whose lease expired, which rows
// selects, with scan: ScanExpired, which also reads the database's now
// into its argument where the driver's clock is the database's. It
// returns them and that now (p.Now when none was read), in UTC.
func ListExpired(rows Rows, p driver.ExpiredParams, scan func(s Scan, now *time.Time) (*driver.TaskRow, error)) ([]driver.TaskRow, time.Time, error) {
	var now time.Time
	out, err := Collect(rows, func(s Scan) (*driver.TaskRow, error) { return scan(s, &now) })
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
	}
	if now.IsZero() {
		now = p.Now
	}
	return out, now.UTC(), nil
}

// StillExpired are the tasks of p whose lease is still expired: those
// whose ids the lock of the expired leases, rows (one id a row), returned,
// in p's order; and their transitions.
func StillExpired(p driver.RescueParams, rows Rows) ([]driver.RescueTask, []driver.Transition, error) {
	locked := map[int64]bool{}
	err := rows(func(scan Scan) error {
		var id int64
		if err := scan(&id); err != nil {
			return err
		}
		locked[id] = true
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var tasks []driver.RescueTask
	var trs []driver.Transition
	for _, rt := range p.Tasks {
		if locked[rt.Transition.ID] {
			tasks, trs = append(tasks, rt), append(trs, rt.Transition)
		}
	}
	return tasks, trs, nil
}

// IDsAt reads rows of an id and the statement's now: the ids in order
// (room made for size of them) and that now in UTC (zero when no row).
func IDsAt(rows Rows, size int) ([]int64, time.Time, error) {
	ids := make([]int64, 0, size)
	var now time.Time
	err := rows(func(scan Scan) error {
		var id int64
		if err := scan(&id, &now); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	return ids, now.UTC(), err
}
