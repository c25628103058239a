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
	s := o.SQL.Nodes
	if _, err := o.DB.exec(ctx, o.DB.Do, s.Register, s.RegisterArgs(p, queues, workers)...); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// ListNodes implements driver.Driver.
func (o *Ops[Q]) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	out, err := Collect(o.DB.pool().Rows(ctx, o.SQL.Nodes.List), o.SQL.Nodes.Scan)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode implements driver.Driver.
func (o *Ops[Q]) RemoveNode(ctx context.Context, name string) error {
	if _, err := o.DB.exec(ctx, o.DB.Do, o.SQL.Nodes.Remove, name); err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	return nil
}
