package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/keelq/keel/driver"
)

// maxInsertRows is the most tasks one multi-row INSERT carries (14
// placeholders each, well under MySQL's 65,535).
const maxInsertRows = 500

// Insert implements driver.Driver: all tasks in one transaction.
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var out []driver.InsertResult
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = d.insert(ctx, tx, params); err != nil {
			return err
		}
		// A context that ended before the commit writes nothing.
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// InsertTx implements driver.Driver. The inserts run under a savepoint so
// a failure leaves nothing of the batch in the caller's transaction. A
// deadlock there rolls back the caller's whole transaction, so it is
// returned, not retried.
func (d *Driver) InsertTx(ctx context.Context, dtx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	tx, err := callerTx(dtx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT keel_insert`); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	out, err := d.insert(ctx, tx, params)
	if err != nil {
		undo := context.WithoutCancel(ctx)
		if _, rbErr := tx.ExecContext(undo, `ROLLBACK TO SAVEPOINT keel_insert`); rbErr != nil {
			return nil, errors.Join(err, fmt.Errorf("insert tasks: undo: %w", rbErr))
		}
		tx.ExecContext(undo, `RELEASE SAVEPOINT keel_insert`) //nolint:errcheck // the savepoint is empty now
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT keel_insert`); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	return out, nil
}

// insert inserts params in the transaction q: tasks without idempotency
// keys with multi-row INSERTs (they cannot conflict), the others one
// INSERT each. Results keep the order of params.
func (d *Driver) insert(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	var plain []int
	for i, p := range params {
		if p.IdemKey == "" {
			plain = append(plain, i)
		}
	}
	for len(plain) > 0 {
		n := min(len(plain), maxInsertRows)
		rows, err := d.insertMany(ctx, q, params, plain[:n])
		if err != nil {
			return nil, err
		}
		for j, i := range plain[:n] {
			out[i] = driver.InsertResult{Task: rows[j]}
		}
		plain = plain[n:]
	}
	for i, p := range params {
		if p.IdemKey == "" {
			continue
		}
		res, err := d.insertKeyed(ctx, q, p)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// insertMany writes the tasks params[which] with one INSERT and reads them
// back. A multi-row INSERT of known size takes consecutive auto-increment
// values (every innodb_autoinc_lock_mode), auto_increment_increment apart
// (read at Open); the read-back checks that every row is the one inserted.
func (d *Driver) insertMany(ctx context.Context, q querier, params []driver.InsertParams, which []int) ([]*driver.TaskRow, error) {
	var text strings.Builder
	text.WriteString(sqlInsert.text[:strings.Index(sqlInsert.text, "{rows}")])
	args := make([]any, 0, len(which)*len(insertRow.nowAt))
	for j, i := range which {
		p := params[i]
		if j > 0 {
			text.WriteString(", ")
		}
		text.WriteString(insertRow.text)
		args = append(args, insertRow.args(d.now(p.Now), p.Queue, p.Type, p.Priority, string(p.Payload),
			p.MaxAttempts, offset(p.RunAt, p.Now), p.Timeout.Milliseconds(), nil, p.PayloadDigest, nullBytes(p.Meta))...)
	}
	res, err := q.ExecContext(ctx, text.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	ids := make([]int64, len(which))
	for j := range ids {
		ids[j] = first + int64(j)*d.idStep
	}
	rows, err := d.getMany(ctx, q, ids)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: read back: %w", err)
	}
	byID := make(map[int64]*driver.TaskRow, len(rows))
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	out := make([]*driver.TaskRow, len(which))
	for j, i := range which {
		r := byID[ids[j]]
		if r == nil || r.PayloadDigest != params[i].PayloadDigest {
			return nil, fmt.Errorf("insert tasks: row %d is not the task inserted there", ids[j])
		}
		out[j] = r
	}
	return out, nil
}

// insertKeyed inserts one task with an idempotency key. The unique index on
// the held key decides: a duplicate-key error means the key is held, and the
// holder is loaded instead.
func (d *Driver) insertKeyed(ctx context.Context, q querier, p driver.InsertParams) (driver.InsertResult, error) {
	text := sqlInsert.text[:strings.Index(sqlInsert.text, "{rows}")] + insertRow.text
	res, err := q.ExecContext(ctx, text, insertRow.args(d.now(p.Now), p.Queue, p.Type, p.Priority, string(p.Payload),
		p.MaxAttempts, offset(p.RunAt, p.Now), p.Timeout.Milliseconds(), p.IdemKey, p.PayloadDigest, nullBytes(p.Meta))...)
	if err == nil {
		id, err := res.LastInsertId()
		if err != nil {
			return driver.InsertResult{}, fmt.Errorf("insert task: %w", err)
		}
		row, err := d.getWith(ctx, q, id)
		if err != nil {
			return driver.InsertResult{}, fmt.Errorf("insert task: read back: %w", err)
		}
		return driver.InsertResult{Task: row}, nil
	}
	if !isDuplicate(err) {
		return driver.InsertResult{}, fmt.Errorf("insert task: %w", err)
	}
	rows, err := q.QueryContext(ctx, sqlByKey, p.IdemKey)
	if err != nil {
		return driver.InsertResult{}, fmt.Errorf("load task holding idempotency key: %w", err)
	}
	held, err := scanTasks(rows, nil)
	if err != nil {
		return driver.InsertResult{}, fmt.Errorf("load task holding idempotency key: %w", err)
	}
	if len(held) == 0 {
		// The holder finished and released the key in between; the caller
		// may retry.
		return driver.InsertResult{}, errors.New("insert task: idempotency key holder vanished, try again")
	}
	row := &held[0]
	if row.PayloadDigest != p.PayloadDigest {
		return driver.InsertResult{}, fmt.Errorf("insert task: key held by task %d: %w", row.ID, driver.ErrIdempotencyConflict)
	}
	return driver.InsertResult{Task: row, Duplicate: true}, nil
}
