package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Insert: the task inserts (InsertTx is sqlutil.Ops's, on insert).
// Their SQL is in queries.go; the COPY of many tasks is in copy.go.

// Insert implements driver.Driver: all tasks in one transaction, run again
// after a deadlock or serialization failure (keys are inserted in order, so
// batches sharing keys do not deadlock on them; anything else still could).
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	if sqlutil.Sequenced(params) {
		return d.InsertSequenced(ctx, params)
	}
	for attempt := 0; ; attempt++ {
		out, err := d.insertTx(ctx, params)
		if err == nil || attempt+1 >= maxTxAttempts || !retryable(err) {
			return out, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// insertTx inserts params in one transaction of its own.
func (d *Driver) insertTx(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", unavailable(ctx, err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	out, queues, err := d.insertNotify(ctx, pgxQuerier{db: tx}, params, true)
	if err != nil {
		return nil, err
	}
	// The caller learns exactly what happened: a context that ended before
	// the commit writes nothing; once committing, the commit is not
	// abandoned halfway because the context ended.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("insert tasks: commit: %w", unavailable(ctx, err))
	}
	d.wakeLocal(queues)
	return out, nil
}

// insert inserts params in the transaction q: tasks without idempotency
// keys with one COPY when there are enough of them (they cannot conflict)
// and q is a pgx transaction, the others one INSERT each. Results keep the
// order of params.
func (d *Driver) insert(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out, err := d.insertAll(ctx, q, params)
	if err != nil {
		return nil, err
	}
	var now time.Time
	if len(params) > 0 {
		now = params[0].Now
	}
	if err := d.countHits(ctx, q, now, out); err != nil {
		return nil, err
	}
	return out, nil
}

// insertAll is insert without counting idempotency hits.
func (d *Driver) insertAll(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var plain []int
	for i, p := range params {
		if p.IdemKey == "" {
			plain = append(plain, i)
		}
	}
	pq, _ := q.(pgxQuerier)
	tx, isTx := pq.db.(pgx.Tx)
	if len(plain) < copyMin || !isTx {
		return d.insertRows(ctx, q, params)
	}
	out := make([]driver.InsertResult, len(params))
	copied, err := d.copyInsert(ctx, tx, params, plain)
	if err != nil {
		return nil, err
	}
	for j, i := range plain {
		out[i] = driver.InsertResult{Task: copied[j]}
	}
	var keyed []driver.InsertParams
	var keyedAt []int
	for i, p := range params {
		if p.IdemKey != "" {
			keyed, keyedAt = append(keyed, p), append(keyedAt, i)
		}
	}
	if len(keyed) > 0 {
		res, err := d.insertRows(ctx, q, keyed)
		if err != nil {
			return nil, err
		}
		for j, i := range keyedAt {
			out[i] = res[j]
		}
	}
	return out, nil
}

// insertRows inserts params one statement each, in sqlutil.InsertOrder;
// results keep the order of params.
func (d *Driver) insertRows(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	for _, i := range sqlutil.InsertOrder(params) {
		p := params[i]
		var row *driver.TaskRow
		err := q.query(ctx, d.sql.insert, []any{d.now(p.Now), p.Queue, p.Type, p.Priority, string(p.Payload),
			p.MaxAttempts, sqlutil.RunAtOffset(p), p.Timeout.Milliseconds(), sqlutil.NullString(p.IdemKey),
			p.PayloadDigest, sqlutil.NullBytes(p.Meta)}, func(scan func(...any) error) error {
			var err error
			row, err = sqlutil.ScanTaskUTC(scan)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		if row != nil {
			out[i] = driver.InsertResult{Task: row}
			continue
		}
		if p.IdemKey == "" {
			return nil, errors.New("insert task: no row inserted")
		}
		// The key is held: the unique index decided, load the holder.
		err = q.byID().query(ctx, d.sql.byKey, []any{p.IdemKey}, func(scan func(...any) error) error {
			var err error
			row, err = sqlutil.ScanTaskUTC(scan)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("load task holding idempotency key: %w", err)
		}
		if out[i], err = sqlutil.KeyHolder(row, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}
