package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// copyMin is the smallest batch of tasks without idempotency keys that is
// written with COPY instead of one INSERT per task.
const copyMin = 8

var copyColumns = []string{"id", "queue", "type", "priority", "payload", "state", "max_attempts", "run_at",
	"timeout_ms", "payload_digest", "created_at", "updated_at", "meta"}

// copyInsert reserves ids and reads the clock in one round trip, then
// writes the rows with COPY.
func (d *Driver) copyInsert(ctx context.Context, tx pgx.Tx, params []driver.InsertParams, which []int) ([]*driver.TaskRow, error) {
	first := params[which[0]]
	ids, base, err := sqlutil.IDsAt(rowsOf(ctx, pgxQuerier{db: tx}, d.sql.reserveIDs, d.now(first.Now), len(which)), len(which))
	if err != nil {
		return nil, fmt.Errorf("insert tasks: reserve ids: %w", err)
	}
	rows := make([]*driver.TaskRow, len(which))
	values := make([][]any, len(which))
	for j, i := range which {
		p := params[i]
		runAt := time.UnixMicro(base.UnixMicro() + offset(p.RunAt, p.Now)).UTC()
		if driver.Held(p.RunAt) {
			runAt = driver.HeldUntil // that instant, whatever the clocks (runAtArg)
		}
		rows[j] = &driver.TaskRow{ID: ids[j], Queue: p.Queue, Type: p.Type, Priority: p.Priority, Payload: p.Payload,
			State: driver.StatePending, MaxAttempts: p.MaxAttempts, RunAt: runAt.Truncate(time.Microsecond),
			Timeout: p.Timeout.Truncate(time.Millisecond), PayloadDigest: p.PayloadDigest,
			CreatedAt: base, UpdatedAt: base, Meta: p.Meta}
		values[j] = []any{ids[j], p.Queue, p.Type, p.Priority, p.Payload, string(driver.StatePending), p.MaxAttempts,
			runAt, p.Timeout.Milliseconds(), p.PayloadDigest, base, base, sqlutil.NullBytes(p.Meta)}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{d.opts.Schema, "keel_tasks"}, copyColumns, pgx.CopyFromRows(values)); err != nil {
		return nil, fmt.Errorf("insert tasks: copy: %w", err)
	}
	return rows, nil
}
