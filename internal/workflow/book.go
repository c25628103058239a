package workflow

import (
	"context"
	"fmt"
	"strings"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/kerr"
)

// MaxTasks is the most tasks one workflow may have.
const MaxTasks = 10_000

// Task is one task of a workflow as its creator describes it: a name
// unique in the workflow, the task, and the names of the tasks it needs.
type Task struct {
	Name  string
	Spec  enqueue.Spec
	Needs []string
}

// Spec is a workflow as its creator describes it.
type Spec struct {
	Name string
	// OnFailure is driver.OnFailureCancel (default when empty) or
	// driver.OnFailureContinue.
	OnFailure string
	Tasks     []Task
}

// ErrNoWorkflows is returned when the driver keeps no workflows.
var ErrNoWorkflows = fmt.Errorf("%w: this driver keeps no workflows", driver.ErrWrongState)

// Book creates workflows: the tasks are checked and prepared as any
// enqueue is, the graph is checked (names, needs, cycles), and the driver
// writes it all in one transaction.
type Book struct {
	// Store keeps the workflows; nil when the driver keeps none.
	Store driver.Workflows
	Enq   *enqueue.Inserter
	// Wrap turns a driver's error into the error returned; nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Order checks s's graph and returns its tasks in an order where each
// comes after those it needs (the given order where it allows), and for
// each task of that order the positions in it of the tasks it needs. Bad
// input is ErrInvalid naming the task.
func Order(s Spec) (order []int, needs [][]int, err error) {
	invalid := kerr.Invalid
	if s.Name == "" || len(s.Name) > 255 {
		return nil, nil, invalid("workflow name must be 1-255 bytes, got %d", len(s.Name))
	}
	if s.OnFailure != "" && s.OnFailure != driver.OnFailureCancel && s.OnFailure != driver.OnFailureContinue {
		return nil, nil, invalid("on_failure %q: use %q or %q", s.OnFailure, driver.OnFailureCancel, driver.OnFailureContinue)
	}
	if len(s.Tasks) == 0 {
		return nil, nil, invalid("a workflow needs at least one task")
	}
	if len(s.Tasks) > MaxTasks {
		return nil, nil, invalid("a workflow has at most %d tasks, got %d", MaxTasks, len(s.Tasks))
	}
	index := make(map[string]int, len(s.Tasks))
	for i, t := range s.Tasks {
		if !driver.ValidName(t.Name) {
			return nil, nil, invalid("task %d: invalid name %q: use 1-128 letters, digits, '_', '.', ':' or '-'", i, t.Name)
		}
		if j, dup := index[t.Name]; dup {
			return nil, nil, invalid("tasks %d and %d: duplicate name %q", j, i, t.Name)
		}
		index[t.Name] = i
	}
	// Kahn's algorithm, taking the first ready task in the given order.
	wait := make([]int, len(s.Tasks))
	dependents := make([][]int, len(s.Tasks))
	for i, t := range s.Tasks {
		seen := map[string]bool{}
		for _, n := range t.Needs {
			j, ok := index[n]
			switch {
			case n == t.Name:
				return nil, nil, invalid("task %q needs itself", t.Name)
			case !ok:
				return nil, nil, invalid("task %q needs %q: no task of that name in the workflow", t.Name, n)
			case seen[n]:
				continue
			}
			seen[n] = true
			wait[i]++
			dependents[j] = append(dependents[j], i)
		}
	}
	pos := make([]int, len(s.Tasks))
	done := make([]bool, len(s.Tasks))
	for len(order) < len(s.Tasks) {
		next := -1
		for i := range s.Tasks {
			if !done[i] && wait[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			var cycle []string
			for i, t := range s.Tasks {
				if !done[i] {
					cycle = append(cycle, t.Name)
				}
			}
			return nil, nil, invalid("the needs of tasks %s form a cycle", strings.Join(cycle, ", "))
		}
		done[next] = true
		pos[next] = len(order)
		order = append(order, next)
		for _, d := range dependents[next] {
			wait[d]--
		}
	}
	needs = make([][]int, len(order))
	for k, i := range order {
		seen := map[int]bool{}
		for _, n := range s.Tasks[i].Needs {
			if p := pos[index[n]]; !seen[p] {
				seen[p] = true
				needs[k] = append(needs[k], p)
			}
		}
	}
	return order, needs, nil
}

// Create checks s and creates the workflow with its tasks in one
// transaction: all or none. The results are in s.Tasks' order.
func (b *Book) Create(ctx context.Context, s Spec) (*driver.WorkflowRow, []driver.InsertResult, error) {
	if b.Store == nil {
		return nil, nil, ErrNoWorkflows
	}
	order, needs, err := Order(s)
	if err != nil {
		return nil, nil, err
	}
	if s.OnFailure == "" {
		s.OnFailure = driver.OnFailureCancel
	}
	specs := make([]enqueue.Spec, len(order))
	graph := make([]driver.WorkflowTask, len(order))
	for k, i := range order {
		t := s.Tasks[i]
		switch o := enqueue.Merge(enqueue.Options{}, t.Spec.Options); {
		case len(o.DependsOn) > 0:
			return nil, nil, kerr.Invalid("task %q: a workflow's task names what it needs, not DependsOn", t.Name)
		case o.Sequence != nil:
			return nil, nil, kerr.Invalid("task %q: a workflow's task cannot take a sequence", t.Name)
		}
		specs[k] = t.Spec
		graph[k] = driver.WorkflowTask{Name: t.Name, Needs: needs[k]}
	}
	var row *driver.WorkflowRow
	results, err := b.Enq.Enqueue(ctx, specs, false, func(params []driver.InsertParams) ([]driver.InsertResult, error) {
		for k, p := range params {
			if len(graph[k].Needs) > 0 && !p.RunAt.Equal(p.Now) {
				return nil, kerr.Invalid("task %q: a task that needs others runs when they have succeeded: no RunAt or Delay", graph[k].Name)
			}
		}
		var out []driver.InsertResult
		var err error
		row, out, err = b.Store.CreateWorkflow(ctx, driver.CreateWorkflowParams{Name: s.Name, OnFailure: s.OnFailure,
			Tasks: params, Graph: graph, Now: params[0].Now})
		return out, err
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([]driver.InsertResult, len(results))
	for k, i := range order {
		out[i] = results[k]
	}
	return row, out, nil
}

// State is a workflow's overall state.
type State string

// The overall states.
const (
	// Running: some task has not reached a final state.
	Running State = "running"
	// Succeeded: every task succeeded.
	Succeeded State = "succeeded"
	// Failed: every task reached a final state, and some did not succeed.
	Failed State = "failed"
)

// Overall is the state of a workflow whose tasks are nodes.
func Overall(nodes []driver.WorkflowNode) State {
	s := Succeeded
	for _, n := range nodes {
		if n.Task == nil {
			continue // archived and deleted: it finished long ago
		}
		switch n.Task.State {
		case driver.StatePending, driver.StateRunning:
			return Running
		case driver.StateDead, driver.StateCancelled:
			s = Failed
		}
	}
	return s
}

// Held reports whether row is a held task.
func Held(row *driver.TaskRow) bool {
	return row != nil && row.State == driver.StatePending && driver.Held(row.RunAt)
}
