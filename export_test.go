package keel

import (
	"context"

	"github.com/keelq/keel/driver"
)

// SampleBacklog takes one sample of the backlog as the leader's loop
// does, for tests that do not wait for it.
func SampleBacklog(ctx context.Context, c *Client) error {
	_, err := c.sampleBacklog(ctx, c.drv.(driver.BacklogStore), 0)
	return err
}
