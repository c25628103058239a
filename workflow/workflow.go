// Package workflow runs tasks of a keel.Client in the order their
// dependencies set: a workflow is a set of named tasks, each naming the
// tasks it needs; a task runs only once every task it needs has
// succeeded. If one of them dies or is cancelled, the tasks that need it
// are cancelled with that reason (and theirs in turn), unless the
// workflow's OnFailure is Continue. The whole workflow is written in one
// transaction, after its names, needs and cycles are checked; a task
// outside a workflow can wait for others too, with keel.DependsOn. The
// leader releases the waiting tasks within a second of their dependencies'
// end. See docs/workflows.md.
package workflow

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/access"
	"github.com/keelq/keel/internal/enqueue"
	iworkflow "github.com/keelq/keel/internal/workflow"
)

// Policy is what becomes of a task when a task it needs dies or is
// cancelled.
type Policy string

// The policies.
const (
	// Cancel cancels it, with the reason ("dependency 12 (B) is dead") in
	// its errors, and so in turn the tasks that need it. The default.
	Cancel Policy = driver.OnFailureCancel
	// Continue runs it all the same, once every task it needs has reached
	// a final state (succeeded, dead or cancelled).
	Continue Policy = driver.OnFailureContinue
)

// Task is one task of a workflow: its name (unique in the workflow: 1-128
// letters, digits, '_', '.', ':' or '-'), the task, and the names of the
// tasks it needs. A task that needs others takes no RunAt, Delay or
// DependsOn option. A task whose idempotency key another task holds fails
// the whole workflow with keel.ErrInvalid: a workflow's tasks are always
// new.
type Task struct {
	Name string
	keel.TaskSpec
	Needs []string
}

// Spec is a workflow: a name (1-255 bytes), its failure policy (default
// Cancel) and its tasks (at most 10,000).
type Spec struct {
	Name      string
	OnFailure Policy
	Tasks     []Task
}

// State is where a workflow stands.
type State string

// The workflow states.
const (
	// Running: some task is pending (waiting or ready) or running.
	Running State = "running"
	// Succeeded: every task succeeded.
	Succeeded State = "succeeded"
	// Failed: every task reached a final state, and some did not succeed.
	Failed State = "failed"
)

// Node is one task of a workflow as Get reads it.
type Node struct {
	Name   string
	TaskID int64
	Type   string
	// State is the task's state; empty when it is no longer stored.
	State keel.State
	// Held: still waiting for the tasks it needs.
	Held bool
	// Needs are the names of the tasks it needs.
	Needs []string
}

// Info is a workflow. Tasks and State are filled by Get and Enqueue, not
// by List.
type Info struct {
	ID        int64
	Name      string
	OnFailure Policy
	CreatedAt time.Time
	State     State
	// Tasks are in the order of their ids.
	Tasks []Node
}

// Filter selects workflows for List, newest first.
type Filter struct {
	// BeforeID pages: only workflows with lower ids.
	BeforeID int64
	// Limit defaults to 100, at most 1000.
	Limit int
}

// Enqueue creates the workflow s on c: its tasks in one transaction, all
// or none, those that need others held until they have succeeded. It
// returns the workflow and its tasks in s.Tasks' order. Bad input (a
// duplicate or unknown name, a task that needs itself, a cycle, a bad
// task) returns an error wrapping keel.ErrInvalid, keel.ErrUnknownType or
// keel.ErrPayloadTooLarge and writes nothing.
func Enqueue(ctx context.Context, c *keel.Client, s Spec) (*Info, []*keel.TaskInfo, error) {
	p := access.Of(c)
	in := iworkflow.Spec{Name: s.Name, OnFailure: string(s.OnFailure), Tasks: make([]iworkflow.Task, len(s.Tasks))}
	for i, t := range s.Tasks {
		in.Tasks[i] = iworkflow.Task{Name: t.Name, Needs: t.Needs,
			Spec: enqueue.Spec{Type: t.Type, Payload: t.Payload, Options: enqueue.Funcs(t.Options)}}
	}
	row, results, err := book(p).Create(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	tasks := p.Enqueued(results).([]*keel.TaskInfo)
	w := info(row)
	for i, t := range s.Tasks {
		w.Tasks = append(w.Tasks, Node{Name: t.Name, TaskID: tasks[i].ID, Type: tasks[i].Type, State: tasks[i].State,
			Held: tasks[i].Held, Needs: t.Needs})
	}
	slices.SortFunc(w.Tasks, func(a, b Node) int { return cmp.Compare(a.TaskID, b.TaskID) })
	w.State = Running
	return w, tasks, nil
}

// Get returns c's workflow id with its tasks and their states, or
// keel.ErrNotFound.
func Get(ctx context.Context, c *keel.Client, id int64) (*Info, error) {
	p := access.Of(c)
	s, err := store(p)
	if err != nil {
		return nil, err
	}
	row, nodes, err := s.GetWorkflow(ctx, id)
	if err != nil {
		return nil, wrap(ctx, p, err)
	}
	return Graph(row, nodes), nil
}

// List returns c's workflows that f selects, newest first, without their
// tasks.
func List(ctx context.Context, c *keel.Client, f Filter) ([]*Info, error) {
	p := access.Of(c)
	s, err := store(p)
	if err != nil {
		return nil, err
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	rows, err := s.ListWorkflows(ctx, driver.WorkflowFilter(f))
	if err != nil {
		return nil, wrap(ctx, p, err)
	}
	out := make([]*Info, len(rows))
	for i := range rows {
		out[i] = info(&rows[i])
	}
	return out, nil
}

// Of returns the workflow c's task id belongs to, without its tasks, or
// keel.ErrNotFound.
func Of(ctx context.Context, c *keel.Client, id int64) (*Info, error) {
	p := access.Of(c)
	s, err := store(p)
	if err != nil {
		return nil, err
	}
	row, err := s.WorkflowOf(ctx, id)
	if err != nil {
		return nil, wrap(ctx, p, err)
	}
	return info(row), nil
}

// Graph converts a workflow as the driver reads it (for the server and
// the dashboard, which read the driver).
func Graph(row *driver.WorkflowRow, nodes []driver.WorkflowNode) *Info {
	w := info(row)
	w.State = State(iworkflow.Overall(nodes))
	names := make(map[int64]string, len(nodes))
	for _, n := range nodes {
		names[n.TaskID] = n.Name
	}
	for _, n := range nodes {
		node := Node{Name: n.Name, TaskID: n.TaskID}
		if n.Task != nil {
			node.Type, node.State, node.Held = n.Task.Type, keel.State(n.Task.State), iworkflow.Held(n.Task)
		}
		for _, id := range n.Needs {
			node.Needs = append(node.Needs, names[id])
		}
		w.Tasks = append(w.Tasks, node)
	}
	return w
}

func info(r *driver.WorkflowRow) *Info {
	return &Info{ID: r.ID, Name: r.Name, OnFailure: Policy(r.OnFailure), CreatedAt: r.CreatedAt}
}

// book is the workflow book of the client p comes from.
func book(p *access.Parts) *iworkflow.Book {
	b := &iworkflow.Book{Enq: p.Enq, Wrap: p.Wrap}
	if s, ok := p.Driver.(driver.Workflows); ok {
		b.Store = s
	}
	return b
}

func store(p *access.Parts) (driver.Workflows, error) {
	s, ok := p.Driver.(driver.Workflows)
	if !ok {
		return nil, iworkflow.ErrNoWorkflows
	}
	return s, nil
}

func wrap(ctx context.Context, p *access.Parts, err error) error {
	if p.Wrap == nil {
		return err
	}
	return p.Wrap(ctx, err)
}
