package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// ETAStatus says what an Estimate is based on, or why it has no times.
type ETAStatus string

// The estimate statuses.
const (
	// ETAEstimated: Start and Finish are set.
	ETAEstimated ETAStatus = "estimated"
	// ETAPaused: the task's queue or type is paused; it starts when resumed.
	ETAPaused ETAStatus = "paused"
	// ETABraked: the automatic brake of the task's type is open or half
	// open; it starts after a probe task succeeds (see Client.Brakes).
	ETABraked ETAStatus = "braked"
	// ETANoWorker: no live worker process works the task's queue.
	ETANoWorker ETAStatus = "no_worker"
	// ETAUnknown: the queue has work ahead but no history yet to say how
	// fast it goes (and this client runs none of its workers).
	ETAUnknown ETAStatus = "unknown"
	// ETAWaiting: the task is held until the member of its sequence
	// before it finished (TaskInfo.Held).
	ETAWaiting ETAStatus = "waiting"
)

// Estimate is when a pending task is expected to start and finish (seed
// 003 §3.1).
type Estimate struct {
	Status ETAStatus
	Start  time.Time // zero unless Status is ETAEstimated
	Finish time.Time // Start plus the type's mean run time; zero unless estimated
	// Ahead counts the ready tasks a claim takes before this one.
	Ahead int64
	// PerSecond is the rate at which the queue's tasks start: measured over
	// the last five minutes of work when there was enough, else the live
	// nodes' workers for the queue (from the node registry, capped by the
	// queue's concurrency setting) divided by the queue's mean run time.
	// The line ahead is counted in tasks of the queue's mean run time.
	PerSecond float64
	// Brake is the state of the type's brake when Status is ETABraked:
	// BrakeOpen (no task of the type runs before NextProbe) or
	// BrakeHalfOpen (probe tasks run now). Empty otherwise.
	Brake BrakeState
	// NextProbe is when the braked type's next probe tasks are due: an
	// open brake's Until, the end of its cooldown (in the past when the
	// leader has yet to let the probes through), and for a half-open brake,
	// whose probes run now, the time of the estimate. Zero unless Status is
	// ETABraked.
	NextProbe time.Time
}

// BrakeState is the state of a type's automatic brake: BrakeClosed,
// BrakeOpen or BrakeHalfOpen.
type BrakeState = driver.BrakeState

// ETA is Estimate's start: ok is false when there is no estimate (the task
// is not pending, paused, not served, or there is no history yet).
func (c *Client) ETA(ctx context.Context, t *TaskInfo) (eta time.Time, ok bool, err error) {
	e, err := c.Estimate(ctx, t)
	if err != nil || e == nil || e.Status != ETAEstimated {
		return time.Time{}, false, err
	}
	return e.Start, true, nil
}

// Estimate estimates when the pending task t starts and finishes, from the
// live counters and the last hour's history: the line ahead of it (the
// ready tasks of higher priority, and of its own priority earlier in line),
// each task counted at its type's mean run time, and the rate at which the
// queue's tasks start. It returns nil for a task that is not pending.
func (c *Client) Estimate(ctx context.Context, t *TaskInfo) (*Estimate, error) {
	if t == nil || t.State != StatePending {
		return nil, nil
	}
	es, err := c.EstimateMany(ctx, []*TaskInfo{t})
	if err != nil {
		return nil, err
	}
	return es[0], nil
}

// EstimateMany is Estimate for each of ts (nil for a task that is not
// pending), in ts's order, with a number of reads that does not grow with
// the tasks: the live counters once, and two index reads for each queue,
// priority and minute of run_at among the ready tasks, which place the
// first and the last of them in line; the tasks between are placed by
// their order among them (a batch of one priority submitted at once: two
// reads). Tasks of more than 32 such groups are placed, past the 32nd,
// behind the other tasks of their minute the counters hold.
func (c *Client) EstimateMany(ctx context.Context, ts []*TaskInfo) ([]*Estimate, error) {
	tasks := make([]*estimator.Task, len(ts))
	for i, t := range ts {
		if t != nil && t.State == StatePending {
			tasks[i] = &estimator.Task{ID: t.ID, Queue: t.Queue, Type: t.Type, Priority: t.Priority, RunAt: t.RunAt}
		}
	}
	es, err := c.eta.EstimatePending(ctx, tasks)
	if err != nil {
		return nil, err
	}
	out := make([]*Estimate, len(ts))
	for i, e := range es {
		if e != nil {
			out[i] = &Estimate{Status: ETAStatus(e.Status), Start: e.Start, Finish: e.Finish, Ahead: e.Ahead,
				PerSecond: e.PerSecond, Brake: e.Brake, NextProbe: e.NextProbe}
		}
	}
	return out, nil
}
