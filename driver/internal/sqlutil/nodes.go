package sqlutil

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
)

// NodeSQL are a driver's keel_nodes statements: Register stores a node
// with the arguments RegisterArgs gives, List selects the nodes for Scan,
// Remove (name) deletes one.
type NodeSQL struct {
	Register, List, Remove string
	// RegisterArgs are Register's arguments for p, its queues (never nil)
	// and its workers as a JSON object.
	RegisterArgs func(p driver.NodeParams, queues []string, workers string) []any
	Scan         func(Scan) (*driver.NodeRow, error)
	// Prune deletes the nodes PruneNodes prunes (with PruneCounts it
	// selects how many it deleted), PruneSources (none when empty) their
	// source reports; PruneArgs are their arguments.
	Prune, PruneSources string
	PruneCounts         bool
	PruneArgs           func(p driver.PruneNodesParams) (nodes, sources []any)
}

// RegisterNode implements driver.Driver.
func (o *Ops[Q]) RegisterNode(ctx context.Context, p driver.NodeParams) error {
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	workers, err := WorkersJSON(p.Workers)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	s := o.c.SQL.Nodes
	if _, err := o.c.DB.exec(ctx, o.c.DB.Do, s.Register, s.RegisterArgs(p, queues, workers)...); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// ListNodes implements driver.Driver.
func (o *Ops[Q]) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Nodes.List), o.c.SQL.Nodes.Scan)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode implements driver.Driver.
func (o *Ops[Q]) RemoveNode(ctx context.Context, name string) error {
	if _, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Nodes.Remove, name); err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	return nil
}

// PruneNodes implements driver.Driver: the nodes whose heartbeat is older
// than p.OlderThan go, with their source reports.
func (o *Ops[Q]) PruneNodes(ctx context.Context, p driver.PruneNodesParams) (int64, error) {
	s := o.c.SQL.Nodes
	var n int64
	err := o.c.DB.Do(ctx, func(q Q) error {
		c := o.c.DB.Conn(q)
		nodes, sources := s.PruneArgs(p)
		var err error
		if s.PruneCounts {
			n, err = scanOne[int64](c.Rows(ctx, s.Prune, nodes...))
		} else {
			n, err = c.Exec(ctx, s.Prune, nodes...)
		}
		if err != nil {
			return fmt.Errorf("prune nodes: %w", err)
		}
		if s.PruneSources == "" {
			return nil
		}
		if _, err := c.Exec(ctx, s.PruneSources, sources...); err != nil {
			return fmt.Errorf("prune source reports: %w", err)
		}
		return nil
	})
	return n, err
}
