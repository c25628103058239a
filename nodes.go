package keel

import (
	"context"
	"os"
	"time"

	"github.com/keelq/keel/driver"
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
}

// Nodes lists the worker processes registered in the database, by name.
// Any client may call it, including one that never starts workers.
func (c *Client) Nodes(ctx context.Context) ([]NodeInfo, error) {
	rows, err := c.drv.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeInfo, len(rows))
	for i, r := range rows {
		out[i] = NodeInfo{Name: r.Name, Host: r.Host, PID: r.PID, Queues: r.Queues, StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt}
	}
	return out, nil
}

// newRegistrar returns the node-registry service of a starting client.
func newRegistrar(c *Client, queues []string) *nodes.Registrar {
	host, _ := os.Hostname()
	return nodes.New(nodes.Config{
		Driver:   c.drv,
		Node:     driver.NodeParams{Name: c.cfg.Node, Host: host, PID: os.Getpid(), Queues: queues, StartedAt: c.cfg.Now()},
		Interval: c.cfg.HeartbeatInterval, LeaseTTL: c.cfg.LeaseTTL,
		Now: c.cfg.Now, Logger: c.cfg.Logger, Leading: c.elector.Leading,
	})
}
