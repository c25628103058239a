package driver

import (
	"context"
	"errors"
	"time"
)

// Workflow failure policies: what becomes of a held task when one of its
// dependencies is dead or cancelled.
const (
	// OnFailureCancel cancels it, with the reason in its errors (the
	// default).
	OnFailureCancel = "cancel"
	// OnFailureContinue runs it all the same once every dependency has
	// reached a final state.
	OnFailureContinue = "continue"
)

// WorkflowRow is one row of keel_workflows: a named graph of tasks
// (keel_workflow_tasks) whose dependencies are in keel_deps.
type WorkflowRow struct {
	ID        int64
	Name      string
	OnFailure string
	CreatedAt time.Time
}

// WorkflowNode is one task of a workflow as GetWorkflow reads it: its name
// in the workflow, the task (nil when it is no longer stored) and the ids
// of the tasks it depends on.
type WorkflowNode struct {
	Name   string
	TaskID int64
	Task   *TaskRow
	Needs  []int64
}

// WorkflowTask is one task of a workflow to create: its name and the
// indexes, in CreateWorkflowParams.Tasks, of the tasks it needs (each
// before it).
type WorkflowTask struct {
	Name  string
	Needs []int
}

// CreateWorkflowParams creates a workflow with its tasks in one
// transaction: all or none. Tasks are in an order where every task comes
// after those it needs (Graph[i] describes Tasks[i]); a task that needs
// others is inserted held (run_at HeldUntil) with a wait row. A task whose
// idempotency key another task holds fails the whole creation with
// ErrInvalid: a workflow's tasks are always new.
type CreateWorkflowParams struct {
	Name      string
	OnFailure string
	Tasks     []InsertParams
	Graph     []WorkflowTask
	Now       time.Time
}

// WorkflowFilter selects workflows for ListWorkflows, newest first.
type WorkflowFilter struct {
	BeforeID int64
	Limit    int // default 100
}

// Dep is a dependency of a held task as the releaser reads it: its id,
// its name in its workflow ("" outside one) and its state, "" when the task
// is no longer stored (purged).
type Dep struct {
	ID    int64
	Name  string
	State State
}

// Wait is a held task's wait row with what decides it: the task's own
// state (Held: still pending at HeldUntil; State "" when it is gone) and
// its dependencies' states.
type Wait struct {
	TaskID    int64
	OnFailure string
	State     State
	Held      bool
	Deps      []Dep
}

// Verdict is what becomes of a held task.
type Verdict struct {
	Kind VerdictKind
	// Reason is a cancel's error, recorded in the task's errors.
	Reason string
}

// VerdictKind names a Verdict.
type VerdictKind int

// The verdicts.
const (
	// Keep leaves the task waiting.
	Keep VerdictKind = iota
	// Release makes it ready now and drops its wait row.
	Release
	// CancelHeld cancels it with Reason and drops its wait row.
	CancelHeld
	// Drop drops the wait row of a task no longer held (a user cancelled
	// it).
	Drop
)

// SettleParams asks to decide the wait of task TaskID: in one
// transaction the driver locks the wait row, reads it again with its
// dependencies, and applies what Decide returns.
type SettleParams struct {
	TaskID int64
	Now    time.Time
	Decide func(w Wait) Verdict
}

// Workflows stores task dependencies and workflows. Every SQL driver
// implements it.
type Workflows interface {
	// InsertHeld inserts tasks in one transaction (tx: the caller's; nil:
	// its own), those with DependsOn held until their dependencies
	// succeed. A dependency that is not in keel_tasks (unknown or
	// archived) is ErrInvalid naming it, and nothing is written. A task
	// whose idempotency key another holds is returned Duplicate, and its
	// dependencies are not recorded.
	InsertHeld(ctx context.Context, tx Tx, params []InsertParams) ([]InsertResult, error)
	// CreateWorkflow creates a workflow (see CreateWorkflowParams).
	CreateWorkflow(ctx context.Context, params CreateWorkflowParams) (*WorkflowRow, []InsertResult, error)
	// GetWorkflow loads workflow id with its tasks, in creation order, or
	// returns ErrNotFound.
	GetWorkflow(ctx context.Context, id int64) (*WorkflowRow, []WorkflowNode, error)
	// ListWorkflows returns the workflows f selects, newest first.
	ListWorkflows(ctx context.Context, f WorkflowFilter) ([]WorkflowRow, error)
	// WorkflowOf returns the workflow task id belongs to, or ErrNotFound.
	WorkflowOf(ctx context.Context, id int64) (*WorkflowRow, error)
	// Waits returns up to limit wait rows of task ids above afterID, by
	// id, each with its task's state and its dependencies' states.
	Waits(ctx context.Context, afterID int64, limit int) ([]Wait, error)
	// Settle decides one wait (see SettleParams) and returns the verdict
	// applied; Keep when the wait row is gone or the verdict changed
	// nothing.
	Settle(ctx context.Context, params SettleParams) (Verdict, error)
	// PruneWorkflows looks at up to Limit workflows with ids above After
	// and deletes, with their task rows and their tasks' dependency rows,
	// those created before Before none of whose tasks is stored any more
	// (neither in keel_tasks nor in keel_archive). It returns the last id
	// it looked at (0 when there was none) and how many it deleted.
	PruneWorkflows(ctx context.Context, params PruneWorkflowsParams) (last, deleted int64, err error)
}

// PruneWorkflowsParams selects the workflows PruneWorkflows looks at.
type PruneWorkflowsParams struct {
	After  int64
	Before time.Time
	Limit  int
}

// ErrDependency: a task names a dependency that is not in keel_tasks
// (unknown, or archived), or a workflow task's idempotency key is held by
// another task. Nothing was written. The layers above report it as
// invalid input.
var ErrDependency = errors.New("keel: invalid dependency")
