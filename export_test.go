package keel

import (
	"context"

	"github.com/keelq/keel/internal/backlog"
)

// SampleBacklog takes one sample of the backlog as the leader's loop
// does, for tests that do not wait for it.
func SampleBacklog(ctx context.Context, c *Client) error {
	return newBacklogSampler(c, c.drv.(backlog.Store)).Sample(ctx)
}
