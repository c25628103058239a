package keel

import (
	"context"
	"time"
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
	rows, err := c.drv.ListNodes(ctx)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	out := make([]NodeInfo, len(rows))
	now := c.cfg.Now()
	for i, r := range rows {
		out[i] = NodeInfo{Name: r.Name, Host: r.Host, PID: r.PID, Queues: r.Queues, StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt, Workers: r.Workers, Version: r.Version, Running: r.Running,
			Lost: now.Sub(r.HeartbeatAt) > c.cfg.liveWindow()}
	}
	return out, nil
}
