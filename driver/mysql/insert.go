package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Insert: the task inserts, multi-row and keyed (InsertTx is
// sqlutil.Ops's, on insert). Their SQL is in queries.go.

// maxInsertRows is the most tasks one multi-row INSERT carries (14
// placeholders each, well under MySQL's 65,535).
const maxInsertRows = 500

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
			p.MaxAttempts, sqlutil.RunAtOffset(p), p.Timeout.Milliseconds(), nil, p.PayloadDigest, sqlutil.NullBytes(p.Meta))...)
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
// holder is loaded instead. The insert or the hit is counted in tally.
func (d *Driver) insertKeyed(ctx context.Context, q querier, p driver.InsertParams, tally *sqlutil.Tally) (driver.InsertResult, error) {
	text := sqlInsert.text[:strings.Index(sqlInsert.text, "{rows}")] + insertRow.text
	res, err := q.ExecContext(ctx, text, insertRow.args(d.now(p.Now), p.Queue, p.Type, p.Priority, string(p.Payload),
		p.MaxAttempts, sqlutil.RunAtOffset(p), p.Timeout.Milliseconds(), p.IdemKey, p.PayloadDigest, sqlutil.NullBytes(p.Meta))...)
	if err == nil {
		id, err := res.LastInsertId()
		if err != nil {
			return driver.InsertResult{}, fmt.Errorf("insert task: %w", err)
		}
		row, err := d.getWith(ctx, q, id)
		if err != nil {
			return driver.InsertResult{}, fmt.Errorf("insert task: read back: %w", err)
		}
		tally.Insert(sqlutil.StateOf(row), row.CreatedAt)
		return driver.InsertResult{Task: row}, nil
	}
	if !isDuplicate(err) {
		return driver.InsertResult{}, fmt.Errorf("insert task: %w", err)
	}
	var holder *driver.TaskRow
	var now time.Time
	err = sqlutil.Query(ctx, q, sqlByKey.text, sqlByKey.args(d.now(p.Now), p.IdemKey)...)(func(scan sqlutil.Scan) error {
		var err error
		holder, err = sqlutil.ScanTaskUTC(func(dest ...any) error { return scan(append(dest, &now)...) })
		return err
	})
	if err != nil {
		return driver.InsertResult{}, fmt.Errorf("load task holding idempotency key: %w", err)
	}
	out, err := sqlutil.KeyHolder(holder, p)
	if err == nil {
		tally.Hit(holder.Queue, holder.Type, now.UTC())
	}
	return out, err
}

// Insert implements driver.Driver: all tasks in one transaction.
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	if sqlutil.Sequenced(params) {
		return d.InsertSequenced(ctx, params)
	}
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

// insert inserts params in the transaction q: tasks without idempotency
// keys with multi-row INSERTs (they cannot conflict), the others one
// INSERT each. Results keep the order of params.
func (d *Driver) insert(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	var tally sqlutil.Tally
	var plain []int
	for i, p := range params {
		if p.IdemKey == "" {
			plain = append(plain, i)
		}
	}
	keyed := len(params) - len(plain)
	for len(plain) > 0 {
		n := min(len(plain), maxInsertRows)
		rows, err := d.insertMany(ctx, q, params, plain[:n])
		if err != nil {
			return nil, err
		}
		for j, i := range plain[:n] {
			out[i] = driver.InsertResult{Task: rows[j]}
			tally.Insert(sqlutil.StateOf(rows[j]), rows[j].CreatedAt)
		}
		plain = plain[n:]
	}
	// The keyed tasks in order of key: batches sharing keys lock them in
	// the same order.
	for _, i := range sqlutil.InsertOrder(params)[len(params)-keyed:] {
		res, err := d.insertKeyed(ctx, q, params[i], &tally)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	if err := count(ctx, q, &tally); err != nil {
		return nil, err
	}
	return out, nil
}
