package mysql

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Claiming ready tasks under a lease (Claim is sqlutil.Ops's, on the
// claim here) and reading them back (Claimed). Their SQL is in queries.go.

// claimTx claims in tx for p with its type filter (see
// sqlutil.ClaimTypes) and keeps the live counters right.
func (d *Driver) claimTx(ctx context.Context, tx querier, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error) {
	pick, pickArgs := claimPick(p, include, exclude)
	var out []driver.TaskRow
	now := d.now(p.Now)
	err := func() error {
		c := sqlutil.GetClaimed()
		defer c.Release()
		var at time.Time
		err := sqlutil.Query(ctx, tx, pick.text, pick.args(now, pickArgs...)...)(func(scan sqlutil.Scan) error {
			if err := scan(&c.ID, &c.Type, &c.Priority, &c.Payload, &c.Attempt, &c.MaxAttempts, &c.Fence,
				&c.RunAt, &c.TimeoutMS, &c.CreatedAt, &c.Snoozes, &c.Meta, &c.Sequence, &at); err != nil {
				return err
			}
			c.Add(p)
			return nil
		})
		if err != nil || c.Len() == 0 {
			return err
		}
		out = c.Rows()
		ids := make([]int64, len(out))
		for i := range out {
			ids[i] = out[i].ID
		}
		// The mark writes the pick's now, so the rows read are the rows
		// written once attempt, fence and the lease move on.
		at = at.UTC()
		lease := offset(p.LeaseExpiresAt, p.Now)
		mark := sqlClaimMark.with("{ids}", "?", len(ids), 1)
		args := append([]any{p.Owner, lease}, idArgs(ids)...)
		res, err := tx.ExecContext(ctx, mark.text, mark.args(at, args...)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
			// Cannot happen: the pick locked the rows. Claim again.
			return errors.Join(err, fmt.Errorf("marked %d of %d tasks picked", n, len(ids)))
		}
		for i := range out {
			r := &out[i]
			r.Attempt, r.Fence = r.Attempt+1, r.Fence+1
			r.AttemptedAt, r.LeaseExpiresAt = at, at.Add(time.Duration(lease)*time.Microsecond)
		}
		// attempted_at is the claim's now.
		var tally sqlutil.Tally
		for i := range out {
			n := sqlutil.StateOf(&out[i])
			o := n
			o.State, o.Attempt = driver.StatePending, n.Attempt-1
			tally.Update(o, n, out[i].AttemptedAt, false)
		}
		return count(ctx, tx, &tally)
	}()
	return out, err
}

// claimPick is the claim's pick for the type filter types (see
// sqlutil.ClaimTypes), and its arguments.
func claimPick(p driver.ClaimParams, include, exclude []string) (stmt, []any) {
	pick, types := sqlClaimPick, []string(nil)
	switch {
	case include != nil && p.Retried:
		pick, types = sqlClaimPickRetried, include
	case include != nil:
		pick, types = sqlClaimPickTypes, include
	case len(exclude) > 0:
		pick, types = sqlClaimPickExcluding, exclude
	}
	if types == nil {
		return pick, []any{p.Queue, p.Limit}
	}
	pick = pick.with("{types}", "?", len(types), 1)
	return pick, append(appendStrings([]any{p.Queue}, types), p.Limit)
}

// Claimed implements driver.Driver.
func (d *Driver) Claimed(ctx context.Context, p driver.ClaimedParams) ([]driver.TaskRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlClaimed.text, sqlClaimed.args(d.now(p.Now), p.Owner, p.Queue, p.Limit)...), sqlutil.ScanTaskUTC)
	if err != nil {
		return nil, fmt.Errorf("read back claimed tasks: %w", err)
	}
	return out, nil
}
