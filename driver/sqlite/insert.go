package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The task inserts, whose SQL is in queries.go. InsertTx is sqlutil.Ops's,
// on insert, and so is the insert of sequence members (InsertSequenced).

// Insert implements driver.Driver. The writer may insert the tasks of
// several concurrent Inserts with one statement (insertTogether).
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var out []driver.InsertResult
	if sqlutil.Sequenced(params) {
		return d.InsertSequenced(ctx, params)
	}
	o := &op{ins: params, res: &out}
	o.fn = func(tx querier) error {
		var err error
		out, err = insert(ctx, tx, params)
		return err
	}
	if err := d.submit(ctx, o); err != nil {
		return nil, err
	}
	return out, nil
}

// insert inserts params with as few statements as it can (see
// insertSQL), in sqlutil.InsertOrder; results keep the order of params.
func insert(ctx context.Context, tx querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	if len(params) == 0 {
		return out, nil
	}
	var next int64
	if err := tx.QueryRowContext(ctx, sqlNextID).Scan(&next); err != nil {
		return nil, fmt.Errorf("insert task: %w", err)
	}
	var tally sqlutil.Tally
	var held []int // the tasks whose key another task holds
	for order := sqlutil.InsertOrder(params); len(order) > 0; {
		k := min(bits.Len(uint(len(order)))-1, maxInsertLog)
		chunk := order[:1<<k]
		order = order[1<<k:]
		args := make([]any, 0, insertArgs<<k)
		for j, i := range chunk {
			p := params[i]
			args = append(args, next+int64(j), p.Queue, p.Type, p.Priority, string(p.Payload), p.MaxAttempts,
				micros(p.RunAt), p.Timeout.Milliseconds(), sqlutil.NullString(p.IdemKey), p.PayloadDigest,
				micros(p.Now), micros(p.Now), sqlutil.NullBytes(p.Meta))
		}
		written, err := insertedIDs(ctx, tx, insertSQL[k], args, next, len(chunk))
		if err != nil {
			return nil, err
		}
		for j, i := range chunk {
			p := params[i]
			switch {
			case written[j]:
				row := insertedRow(next+int64(j), p)
				out[i] = driver.InsertResult{Task: row}
				tally.Insert(sqlutil.StateOf(row), p.Now)
			case p.IdemKey != "":
				held = append(held, i)
			default:
				return nil, fmt.Errorf("insert task: task %d was not written", next+int64(j))
			}
		}
		next += int64(len(chunk))
	}
	for _, i := range held {
		// The key is held: the unique index decided, load the holder (it
		// may be a task of this very batch).
		p := params[i]
		row, err := scanTask(tx.QueryRowContext(ctx, sqlByKey, p.IdemKey).Scan)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("load task holding idempotency key: %w", err)
		}
		if out[i], err = sqlutil.KeyHolder(row, p); err != nil {
			return nil, err
		}
		tally.Hit(row.Queue, row.Type, p.Now)
	}
	if err := count(ctx, tx, &tally); err != nil {
		return nil, err
	}
	return out, nil
}

// insertedIDs runs one insert statement of n rows with ids from first on
// and reports which rows it wrote.
func insertedIDs(ctx context.Context, tx querier, query string, args []any, first int64, n int) ([]bool, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("insert task: %w", err)
	}
	defer rows.Close()
	written := make([]bool, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		if j := id - first; j >= 0 && j < int64(n) {
			written[j] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert task: %w", err)
	}
	return written, nil
}

// insertedRow is the row insert wrote for p with id, as reading it
// back would return it: reading it cost more than the insert.
func insertedRow(id int64, p driver.InsertParams) *driver.TaskRow {
	created := fromMicros(micros(p.Now))
	return &driver.TaskRow{ID: id, Queue: p.Queue, Type: p.Type, Priority: p.Priority,
		Payload: bytes.Clone(p.Payload), State: driver.StatePending, MaxAttempts: p.MaxAttempts,
		RunAt: fromMicros(micros(p.RunAt)), Timeout: time.Duration(p.Timeout.Milliseconds()) * time.Millisecond,
		IdemKey: p.IdemKey, PayloadDigest: p.PayloadDigest, CreatedAt: created, UpdatedAt: created,
		Meta: bytes.Clone(p.Meta)}
}
