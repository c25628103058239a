package postgres

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Claiming ready tasks under a lease (Claim is sqlutil.Ops's, on the
// claim here) and reading them back (Claimed). Their SQL is in queries.go.

// claim runs the claim for p with its type filter (see sqlutil.ClaimTypes)
// on q.
func (d *Driver) claim(ctx context.Context, q querier, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error) {
	query, args := d.sql.claim, []any{d.now(p.Now), p.Queue, p.Limit, p.Owner, offset(p.LeaseExpiresAt, p.Now)}
	switch {
	case include != nil && p.Retried:
		query, args = d.sql.claimRetried, append(args, include)
	case include != nil:
		query, args = d.sql.claimTypes, append(args, include)
	case len(exclude) > 0:
		query, args = d.sql.claimExcluding, append(args, exclude)
	}
	c := sqlutil.GetClaimed()
	defer c.Release()
	err := q.query(ctx, query, args, func(scan func(...any) error) error {
		if err := scan(&c.ID, &c.Type, &c.Priority, &c.Payload, &c.Attempt, &c.MaxAttempts, &c.Fence,
			&c.RunAt, &c.TimeoutMS, &c.CreatedAt, &c.LeaseExpiresAt, &c.AttemptedAt, &c.Snoozes, &c.Meta, &c.Sequence); err != nil {
			return err
		}
		c.Add(p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	return c.Rows(), nil
}

// Claimed implements driver.Driver.
func (d *Driver) Claimed(ctx context.Context, p driver.ClaimedParams) ([]driver.TaskRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.sql.claimed, d.now(p.Now), p.Owner, p.Queue, p.Limit), sqlutil.ScanTaskUTC)
	if err != nil {
		return nil, fmt.Errorf("read back claimed tasks: %w", err)
	}
	return out, nil
}
