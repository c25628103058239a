package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/nodes"
)

// NodeInfo is one worker process in the node registry: every started
// Client records itself there and refreshes its row every
// HeartbeatInterval; a graceful Stop removes the row, and the leader
// removes the rows of nodes silent for three LeaseTTLs (crashed or cut off).
type NodeInfo struct {
	Name        string    // Config.Node
	Host        string    // host name
	PID         int       // process id
	Queues      []string  // queues it works, sorted
	StartedAt   time.Time // when its Start ran
	HeartbeatAt time.Time // its last refresh
	// Workers is how many tasks of each queue it runs at once (empty for
	// a node running an older keel).
	Workers map[string]int
	// Version is the keel version it runs ("" for an older keel or an
	// unknown build); Running how many tasks it ran at its last
	// heartbeat.
	Version string
	Running int
	// Lost: its last heartbeat is older than three heartbeat intervals
	// (at least 30s) by this client's clock: crashed, stuck or cut off.
	// Stats and the ETA count lost nodes as serving nothing.
	Lost bool
}

// Nodes lists the worker processes registered in the database, by name.
// Any client may call it, including one that never starts workers.
func (c *Client) Nodes(ctx context.Context) ([]NodeInfo, error) {
	list, err := nodes.List(ctx, c.drv, c.cfg.Now(), c.cfg.liveWindow())
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return conv.Rows(list, func(n *nodes.Info) NodeInfo { return NodeInfo(*n) }), nil
}
