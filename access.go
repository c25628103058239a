package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/access"
)

// The feature packages (batch, workflow) reach a client's parts here.
func init() {
	access.Of = func(client any) *access.Parts {
		c := client.(*Client)
		return &access.Parts{Driver: c.drv, Enq: c.enq, Now: c.cfg.Now, Wrap: unavailable,
			Info:     func(r *driver.TaskRow) any { return infoFromRow(r) },
			Enqueued: func(results []driver.InsertResult) any { return c.enqueued(results) },
			Finish: func(ctx context.Context, id int64) time.Time {
				if t, err := c.Get(ctx, id); err == nil {
					if est, err := c.Estimate(ctx, t); err == nil && est != nil && est.Status == ETAEstimated {
						return est.Finish
					}
				}
				return time.Time{}
			}}
	}
}
