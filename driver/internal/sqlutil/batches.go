package sqlutil

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// BatchColumns are the keel_batches columns ScanBatch reads, in its order.
const BatchColumns = `id, total, on_success, on_finish, on_success_id, on_finish_id, succeeded, dead, cancelled,
	created_at, sealed_at, finished_at`

// ScanBatch reads one row selected with BatchColumns. T is how the
// database hands over a timestamp and N one that may be NULL; at and opt
// turn them into UTC times (opt gives the zero time for NULL).
func ScanBatch[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.BatchRow, error) {
	var (
		b                   driver.BatchRow
		onSuccess, onFinish []byte
		successID, finishID sql.NullInt64
		created             T
		sealed, finished    N
	)
	if err := scan(&b.ID, &b.Total, &onSuccess, &onFinish, &successID, &finishID, &b.Succeeded, &b.Dead, &b.Cancelled,
		&created, &sealed, &finished); err != nil {
		return nil, err
	}
	if len(onSuccess) > 0 {
		b.OnSuccess = onSuccess
	}
	if len(onFinish) > 0 {
		b.OnFinish = onFinish
	}
	b.OnSuccessID, b.OnFinishID = successID.Int64, finishID.Int64
	b.CreatedAt, b.SealedAt, b.FinishedAt = at(created), opt(sealed), opt(finished)
	return &b, nil
}

// BatchSQL are a driver's batch statements, each taking its arguments in
// the order named:
//   - Insert (created at, sealed at or NULL, on_success, on_finish) inserts
//     a batch and returns its id, or, with LastID set, inserts it and LastID
//     returns the id;
//   - Members (batch id, member ids) gives inserted tasks their batch;
//   - Total (total, batch id) sets its total;
//   - Lock (batch id) locks an open batch and returns its id (no row:
//     none, or sealed); LockAny (batch id) locks a batch and returns its
//     BatchColumns;
//   - Seal (sealed at, batch id) seals an open batch;
//   - Get (batch id) selects BatchColumns;
//   - Counts (batch id) selects state and count of its members in
//     keel_tasks, ArchiveCounts the same in keel_archive;
//   - Prune (finished before, limit) deletes the batches that finished
//     before a time, oldest first;
//   - LastPending (batch id) selects the id of its pending member with
//     the highest id;
//   - Unfinished (batch id) selects one pending or running member's id;
//   - Finish (finished at, succeeded, dead, cancelled, on_success id,
//     on_finish id, batch id) records the finish of an unfinished batch;
//   - Open (limit) selects the ids of sealed, unfinished batches, oldest
//     first;
//   - List (filter) is ListBatches' query; Page (batch id, after id,
//     limit) selects task columns of members, by id.
//
// Scan reads BatchColumns; ScanTask reads a member.
type BatchSQL struct {
	Insert, LastID, Total, LastPending, Prune, Lock, LockAny, Seal, Get, Counts, ArchiveCounts, Unfinished, Finish, Open, Page string
	Members                                                                                                                    func(batch int64, ids []int64) (string, []any)
	List                                                                                                                       func(f driver.BatchFilter) (string, []any)
	Scan                                                                                                                       func(Scan) (*driver.BatchRow, error)
	ScanTask                                                                                                                   func(Scan) (*driver.TaskRow, error)
}

// membersChunk is how many members one Members statement names.
const membersChunk = 500

// CreateBatch implements driver.Batcher.
func (o *Ops[Q]) CreateBatch(ctx context.Context, p driver.CreateBatchParams) (*driver.BatchRow, []driver.InsertResult, error) {
	s, db := o.c.SQL.Batches, o.c.DB
	var (
		row   *driver.BatchRow
		out   []driver.InsertResult
		after func()
	)
	err := db.Commit(ctx, func(q Q) error {
		row, out, after = nil, nil, nil
		c := db.Conn(q)
		sealed := any(nil)
		if p.Seal {
			sealed = db.Time(p.Now)
		}
		args := []any{db.Time(p.Now), sealed, nullDoc(p.OnSuccess), nullDoc(p.OnFinish)}
		var id int64
		var err error
		if s.LastID == "" {
			id, err = oneID(c.Rows(ctx, s.Insert, args...))
		} else if _, err = c.Exec(ctx, s.Insert, args...); err == nil {
			id, err = oneID(c.Rows(ctx, s.LastID))
		}
		if err != nil {
			return err
		}
		if out, after, err = o.addMembers(ctx, q, id, p.Tasks); err != nil {
			return err
		}
		row, err = One(c.Rows(ctx, s.Get, id), s.Scan)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create batch: %w", err)
	}
	if after != nil {
		after()
	}
	return row, out, nil
}

// addMembers inserts tasks as members of batch id in the transaction q and
// adds them to its total.
func (o *Ops[Q]) addMembers(ctx context.Context, q Q, id int64, tasks []driver.InsertParams) ([]driver.InsertResult, func(), error) {
	s, c := o.c.SQL.Batches, o.c.DB.Conn(q)
	if len(tasks) == 0 {
		return nil, nil, nil
	}
	for _, t := range tasks {
		if len(t.DependsOn) > 0 {
			return nil, nil, fmt.Errorf("%w: a batch's task cannot depend on other tasks", driver.ErrDependency)
		}
	}
	out, after, err := o.insertIn(ctx, q, tasks)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]int64, 0, len(out))
	for _, r := range out {
		if !r.Duplicate {
			ids = append(ids, r.Task.ID)
		}
	}
	for start := 0; start < len(ids); start += membersChunk {
		query, args := s.Members(id, ids[start:min(start+membersChunk, len(ids))])
		if _, err := c.Exec(ctx, query, args...); err != nil {
			return nil, nil, err
		}
	}
	for i := range out {
		if !out[i].Duplicate {
			out[i].Task.BatchID = id
		}
	}
	if len(ids) > 0 {
		if _, err := c.Exec(ctx, s.Total, int64(len(ids)), id); err != nil {
			return nil, nil, err
		}
	}
	return out, after, nil
}

// AddToBatch implements driver.Batcher.
func (o *Ops[Q]) AddToBatch(ctx context.Context, p driver.AddBatchParams) (*driver.BatchRow, []driver.InsertResult, error) {
	s, db := o.c.SQL.Batches, o.c.DB
	var (
		row   *driver.BatchRow
		out   []driver.InsertResult
		after func()
	)
	err := db.Commit(ctx, func(q Q) error {
		row, out, after = nil, nil, nil
		c := db.Conn(q)
		locked, err := Collect(c.Rows(ctx, s.Lock, p.ID), scanInt64)
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			b, err := One(c.Rows(ctx, s.Get, p.ID), s.Scan)
			if err == nil && b == nil {
				err = driver.ErrNotFound
			} else if err == nil {
				err = fmt.Errorf("%w: batch %d is sealed", driver.ErrWrongState, p.ID)
			}
			return err
		}
		if out, after, err = o.addMembers(ctx, q, p.ID, p.Tasks); err != nil {
			return err
		}
		if p.Seal {
			if _, err := c.Exec(ctx, s.Seal, db.Time(p.Now), p.ID); err != nil {
				return err
			}
		}
		row, err = One(c.Rows(ctx, s.Get, p.ID), s.Scan)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("add to batch %d: %w", p.ID, err)
	}
	if after != nil {
		after()
	}
	return row, out, nil
}

// SealBatch implements driver.Batcher.
func (o *Ops[Q]) SealBatch(ctx context.Context, id int64, now time.Time) (*driver.BatchRow, error) {
	s, db := o.c.SQL.Batches, o.c.DB
	var row *driver.BatchRow
	err := db.Commit(ctx, func(q Q) error {
		c := db.Conn(q)
		if _, err := c.Exec(ctx, s.Seal, db.Time(now), id); err != nil {
			return err
		}
		var err error
		row, err = One(c.Rows(ctx, s.Get, id), s.Scan)
		if err == nil && row == nil {
			err = driver.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seal batch %d: %w", id, err)
	}
	return row, nil
}

// GetBatch implements driver.Batcher: the batch and its counts in one
// read snapshot.
func (o *Ops[Q]) GetBatch(ctx context.Context, id int64) (*driver.BatchRow, driver.BatchCounts, error) {
	s, db := o.c.SQL.Batches, o.c.DB
	var (
		row    *driver.BatchRow
		counts driver.BatchCounts
	)
	err := db.Read(ctx, func(q Q) error {
		c := db.Conn(q)
		var err error
		if row, err = One(c.Rows(ctx, s.Get, id), s.Scan); err != nil || row == nil {
			return err
		}
		if counts, err = o.batchCounts(ctx, c, id); err != nil || counts.Pending == 0 {
			return err
		}
		last, err := Collect(c.Rows(ctx, s.LastPending, id), scanInt64)
		if err == nil && len(last) > 0 {
			counts.LastPending = last[0]
		}
		return err
	})
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, driver.BatchCounts{}, fmt.Errorf("get batch %d: %w", id, err)
	}
	return row, counts, nil
}

// batchCounts counts batch id's members by state, in keel_tasks and
// keel_archive.
func (o *Ops[Q]) batchCounts(ctx context.Context, c Conn, id int64) (driver.BatchCounts, error) {
	var counts driver.BatchCounts
	for _, query := range []string{o.c.SQL.Batches.Counts, o.c.SQL.Batches.ArchiveCounts} {
		err := c.Rows(ctx, query, id)(func(scan Scan) error {
			var (
				state string
				n     int64
			)
			if err := scan(&state, &n); err != nil {
				return err
			}
			counts.Add(driver.State(state), n)
			return nil
		})
		if err != nil {
			return driver.BatchCounts{}, err
		}
	}
	return counts, nil
}

// ListBatches implements driver.Batcher.
func (o *Ops[Q]) ListBatches(ctx context.Context, f driver.BatchFilter) ([]driver.BatchRow, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	query, args := o.c.SQL.Batches.List(f)
	out, err := Collect(o.c.DB.pool().Rows(ctx, query, args...), o.c.SQL.Batches.Scan)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	return out, nil
}

// BatchMembers implements driver.Batcher.
func (o *Ops[Q]) BatchMembers(ctx context.Context, id, afterID int64, limit int) ([]driver.TaskRow, error) {
	if err := driver.CheckMembersPage(afterID, limit); err != nil {
		return nil, fmt.Errorf("members of batch %d: %w", id, err)
	}
	out, err := Collect(o.c.DB.Conn(o.c.DB.Lookup).Rows(ctx, o.c.SQL.Batches.Page, id, afterID, limit), o.c.SQL.Batches.ScanTask)
	if err != nil {
		return nil, fmt.Errorf("members of batch %d: %w", id, err)
	}
	return out, nil
}

// UnfinishedBatches implements driver.Batcher.
func (o *Ops[Q]) UnfinishedBatches(ctx context.Context, limit int) ([]int64, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Batches.Open, limit), scanInt64)
	if err != nil {
		return nil, fmt.Errorf("list unfinished batches: %w", err)
	}
	return out, nil
}

// FinishBatch implements driver.Batcher. The batch's row is locked first,
// so two calls at once take turns and the second finds it finished; the
// members are read after the lock, so every transition committed before
// it is seen.
func (o *Ops[Q]) FinishBatch(ctx context.Context, p driver.FinishBatchParams) (*driver.BatchRow, bool, error) {
	s, db := o.c.SQL.Batches, o.c.DB
	var (
		row      *driver.BatchRow
		finished bool
		after    func()
	)
	err := db.Commit(ctx, func(q Q) error {
		row, finished, after = nil, false, nil
		c := db.Conn(q)
		var err error
		if row, err = One(c.Rows(ctx, s.LockAny, p.ID), s.Scan); err != nil || row == nil {
			return err
		}
		if row.SealedAt.IsZero() || !row.FinishedAt.IsZero() {
			return nil
		}
		left, err := Collect(c.Rows(ctx, s.Unfinished, p.ID), scanInt64)
		if err != nil || len(left) > 0 {
			return err
		}
		counts, err := o.batchCounts(ctx, c, p.ID)
		if err != nil {
			return err
		}
		now := p.Now()
		onSuccess, onFinish, err := p.Callbacks(row, counts, now)
		if err != nil {
			return err
		}
		var successID, finishID any
		var afters []func()
		for _, cb := range []struct {
			params *driver.InsertParams
			id     *any
		}{{onSuccess, &successID}, {onFinish, &finishID}} {
			if cb.params == nil {
				continue
			}
			res, then, err := o.c.InsertIn(ctx, q, []driver.InsertParams{*cb.params})
			if err != nil {
				return err
			}
			*cb.id = res[0].Task.ID
			afters = append(afters, then)
		}
		if _, err := c.Exec(ctx, s.Finish, db.Time(now), counts.Succeeded, counts.Dead, counts.Cancelled,
			successID, finishID, p.ID); err != nil {
			return err
		}
		after = func() {
			for _, f := range afters {
				if f != nil {
					f()
				}
			}
		}
		finished = true
		row, err = One(c.Rows(ctx, s.Get, p.ID), s.Scan)
		return err
	})
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("finish batch %d: %w", p.ID, err)
	}
	if after != nil {
		after()
	}
	return row, finished, nil
}

// PruneBatches implements driver.Batcher.
func (o *Ops[Q]) PruneBatches(ctx context.Context, before time.Time, limit int) (int64, error) {
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Batches.Prune, o.c.DB.Time(before), limit)
	if err != nil {
		return 0, fmt.Errorf("prune batches: %w", err)
	}
	return n, nil
}

// nullDoc is a stored document as an argument: NULL when there is none.
func nullDoc(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// oneID reads the one id rows return.
func oneID(rows Rows) (int64, error) {
	ids, err := Collect(rows, scanInt64)
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("insert returned %d ids", len(ids))
	}
	return ids[0], nil
}

func scanInt64(scan Scan) (*int64, error) {
	var v int64
	if err := scan(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// BatchList is ListBatches' query on a select of BatchColumns from
// keel_batches, with mark the dialect's placeholder of the nth argument.
func BatchList(base string, f driver.BatchFilter, mark func(n int) string) (string, []any) {
	var where []string
	var args []any
	if f.Unfinished {
		where = append(where, "finished_at IS NULL")
	}
	if f.BeforeID > 0 {
		args = append(args, f.BeforeID)
		where = append(where, "id < "+mark(len(args)))
	}
	q := base
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, f.Limit)
	return q + " ORDER BY id DESC LIMIT " + mark(len(args)), args
}
