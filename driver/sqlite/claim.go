package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Claiming ready tasks under a lease (Claim is sqlutil.Ops's, on the
// claim here) and reading them back (Claimed). Their SQL is in queries.go.

// claimCounted claims in tx for p with its type filter (see
// sqlutil.ClaimTypes) and keeps the live counters right. Only the writer
// calls it.
func (d *Driver) claimCounted(ctx context.Context, tx querier, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error) {
	w := waited(tx)
	p.Now, p.LeaseExpiresAt = p.Now.Add(w), p.LeaseExpiresAt.Add(w)
	query, args := sqlClaim, []any{p.Owner, micros(p.LeaseExpiresAt), micros(p.Now), p.Queue, p.Limit}
	switch {
	case include != nil && p.Retried:
		query, args = sqlClaimRetried, append(args, sqlutil.JSONStrings(include))
	case include != nil:
		query, args = sqlClaimTypes, append(args, sqlutil.JSONStrings(include))
	case len(exclude) > 0:
		query, args = sqlClaimExcluding, append(args, sqlutil.JSONStrings(exclude))
	}
	var out []driver.TaskRow
	if err := d.claim(ctx, tx, query, args, p, &out); err != nil {
		return nil, err
	}
	var tally sqlutil.Tally
	for i := range out {
		n := sqlutil.StateOf(&out[i])
		o := n
		o.State, o.Attempt = driver.StatePending, n.Attempt-1
		tally.Update(o, n, p.Now, false)
	}
	return out, count(ctx, tx, &tally)
}

// claim runs the claim query and appends the claimed tasks to out. The
// rows are read into the writer's claim buffer and appended in one step:
// grown row by row, a claim of 500 tasks allocated twice its rows' size
// (the drain's largest allocation). Only the writer calls it.
func (d *Driver) claim(ctx context.Context, tx querier, query string, args []any, p driver.ClaimParams, out *[]driver.TaskRow) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("claim tasks: %w", err)
	}
	defer rows.Close()
	buf := d.claimBuf[:0]
	defer func() {
		clear(buf) // drop the rows' payloads and strings
		d.claimBuf = buf[:0]
	}()
	var (
		id, fence                   int64
		typ, seq                    string
		priority, attempt, max, snz int
		payload, meta               []byte
		runAt, timeoutMS, createdAt int64
	)
	for rows.Next() {
		if err := rows.Scan(&id, &typ, &priority, &payload, &attempt, &max,
			&fence, &runAt, &timeoutMS, &createdAt, &snz, &meta, &seq); err != nil {
			return fmt.Errorf("claim tasks: %w", err)
		}
		buf = append(buf, driver.TaskRow{ID: id, Queue: p.Queue, Type: typ, Priority: priority, Payload: payload,
			State: driver.StateRunning, Attempt: attempt, MaxAttempts: max, Snoozes: snz, Fence: fence,
			RunAt: fromMicros(runAt), Timeout: time.Duration(timeoutMS) * time.Millisecond,
			LeaseOwner: p.Owner, LeaseExpiresAt: p.LeaseExpiresAt, CreatedAt: fromMicros(createdAt),
			AttemptedAt: p.Now, Meta: meta, Sequence: seq})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	*out = append(*out, buf...)
	return nil
}

// Claimed implements driver.Driver.
func (d *Driver) Claimed(ctx context.Context, p driver.ClaimedParams) ([]driver.TaskRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.rdb, sqlClaimed, p.Owner, p.Queue, micros(p.Now), p.Limit), scanTask)
	if err != nil {
		return nil, fmt.Errorf("read back claimed tasks: %w", err)
	}
	return out, nil
}
