package sqlutil

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// WorkflowColumns are the keel_workflows columns ScanWorkflow reads, in
// its order.
const WorkflowColumns = `id, name, on_failure, created_at`

// ScanWorkflow reads one row selected with WorkflowColumns; at turns the
// database's timestamp T into a UTC time.
func ScanWorkflow[T any](scan Scan, at func(T) time.Time) (*driver.WorkflowRow, error) {
	var (
		w       driver.WorkflowRow
		created T
	)
	if err := scan(&w.ID, &w.Name, &w.OnFailure, &created); err != nil {
		return nil, err
	}
	w.CreatedAt = at(created)
	return &w, nil
}

// ScanWorkflowUTC is ScanWorkflow for databases that hand over a
// time.Time.
func ScanWorkflowUTC(scan Scan) (*driver.WorkflowRow, error) { return ScanWorkflow(scan, UTC) }

// WorkflowSQL are a driver's statements of task dependencies and
// workflows, each taking its arguments in the order named. {ids} in a
// query is replaced by In with a list of ids. A held task is one pending
// with run_at at driver.HeldUntil.
//   - Insert (name, on_failure, created at) inserts a workflow and returns
//     its id or, with LastID set, inserts it and LastID returns the id;
//   - Member (workflow id, name, task id) inserts a workflow's task;
//   - Dep (task id, dep id) inserts a dependency; Wait (task id,
//     on_failure, created at) a wait row;
//   - Live ({ids}) selects the ids among them in keel_tasks;
//   - Get (workflow id) selects WorkflowColumns; Of (task id) the same of
//     the task's workflow; List (filter) is ListWorkflows' query;
//   - Members (workflow id) selects name and task id of its tasks, by
//     task id;
//   - Deps ({ids}) selects task id, dep id, the dep's state (” when it is
//     in neither keel_tasks nor keel_archive) and its name in its workflow
//     (” when none), of the dependencies of the tasks with those ids;
//   - Waits (after id, limit) selects task id, on_failure, the task's state
//     (” when gone) and 1 when it is held, else 0, of the wait rows by
//     task id; LockWait (task id) the same of one wait row, locked;
//   - Counted (task id) selects queue, type, priority and attempt of a
//     held task, locked;
//   - Release (now, task id) makes a held task ready; Cancel (now, errors
//     JSON, task id) cancels a held task; both match nothing otherwise;
//   - DropWait (task id) deletes a wait row; DropDeps (task id, task id)
//     the task's dependency rows unless it is in a workflow;
//   - UpTo (after id, limit) selects the largest of the first limit
//     workflow ids above after (NULL when there is none); Prune (after,
//     up to, created before) deletes, among the workflows with ids in
//     (after, up to], those created before that no task of is stored;
//     Orphans (after, up to) selects the task ids of the keel_workflow_tasks
//     rows in that range whose workflow is gone; DropOrphans ({ids})
//     deletes the rows of those tasks, PruneDeps ({ids}) their dependency
//     rows;
//   - Hold (task id) sets a task's run_at to driver.HeldUntil (the
//     insert of a driver that takes run times relative to the database's
//     clock may have stored another).
type WorkflowSQL[Q any] struct {
	Hold, Insert, LastID, Member, Dep, Wait, Live, Get, Of, Members, Deps, Waits, LockWait, Counted, Release, Cancel, DropWait string
	DropDeps, UpTo, Prune, Orphans, DropOrphans, PruneDeps                                                                     string
	In                                                                                                                         func(query string, ids []int64) (string, []any)
	List                                                                                                                       func(f driver.WorkflowFilter) (string, []any)
	Scan                                                                                                                       func(Scan) (*driver.WorkflowRow, error)
	// Task loads a task, from keel_tasks or keel_archive (the driver's
	// Get).
	Task func(ctx context.Context, id int64) (*driver.TaskRow, error)
	// Count writes a tally in the transaction q; nil where the database
	// counts with triggers.
	Count func(ctx context.Context, q Q, t *Tally) error
}

// InsertHeld implements driver.Workflows.
func (o *Ops[Q]) InsertHeld(ctx context.Context, tx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	return o.insertWith(ctx, tx, params, o.insertHeld)
}

// insertHeld checks that every dependency is in keel_tasks, inserts the
// tasks with insert (those with dependencies held) and records their
// dependencies and wait rows, in the transaction q.
func (o *Ops[Q]) insertHeld(ctx context.Context, q Q, params []driver.InsertParams, insert insertFunc[Q]) ([]driver.InsertResult, func(), error) {
	if Sequenced(params) {
		return nil, nil, fmt.Errorf("%w: tasks with dependencies and tasks of a sequence are enqueued apart", driver.ErrDependency)
	}
	var deps []int64
	for _, p := range params {
		deps = append(deps, p.DependsOn...)
	}
	if err := o.checkLive(ctx, q, deps); err != nil {
		return nil, nil, err
	}
	held := make([]driver.InsertParams, len(params))
	for i, p := range params {
		held[i] = p
		if len(p.DependsOn) > 0 {
			held[i].RunAt = driver.HeldUntil
		}
	}
	out, after, err := insert(ctx, q, held)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range out {
		if r.Duplicate || len(params[i].DependsOn) == 0 {
			continue
		}
		if err := o.fixHeld(ctx, q, r.Task, params[i].Now); err != nil {
			return nil, nil, err
		}
		if err := o.hold(ctx, q, r.Task.ID, params[i].DependsOn, driver.OnFailureCancel, params[i].Now); err != nil {
			return nil, nil, err
		}
	}
	return out, after, nil
}

// checkLive returns driver.ErrDependency naming the first of ids that is
// not in keel_tasks.
func (o *Ops[Q]) checkLive(ctx context.Context, q Q, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	s := o.c.SQL.Workflows
	query, args := s.In(s.Live, ids)
	live, err := Collect(o.c.DB.Conn(q).Rows(ctx, query, args...), scanInt64)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.Contains(live, id) {
			return fmt.Errorf("%w: dependency %d: no such task (unknown, or archived)", driver.ErrDependency, id)
		}
	}
	return nil
}

// fixHeld makes the run time of task, just inserted held, HeldUntil where
// the insert stored another (a run time taken relative to the database's
// clock), keeping the live counters right.
func (o *Ops[Q]) fixHeld(ctx context.Context, q Q, task *driver.TaskRow, now time.Time) error {
	if driver.Held(task.RunAt) {
		return nil
	}
	s := o.c.SQL.Workflows
	if _, err := o.c.DB.Conn(q).Exec(ctx, s.Hold, task.ID); err != nil {
		return err
	}
	old := StateOf(task)
	task.RunAt = driver.HeldUntil
	if s.Count != nil {
		var t Tally
		t.Update(old, StateOf(task), now, false)
		return s.Count(ctx, q, &t)
	}
	return nil
}

// hold records task id's dependencies deps and its wait row.
func (o *Ops[Q]) hold(ctx context.Context, q Q, id int64, deps []int64, onFailure string, now time.Time) error {
	s, c := o.c.SQL.Workflows, o.c.DB.Conn(q)
	deps = slices.Clone(deps)
	slices.Sort(deps)
	for _, dep := range slices.Compact(deps) {
		if dep == id {
			return fmt.Errorf("%w: task %d depends on itself", driver.ErrDependency, id)
		}
		if _, err := c.Exec(ctx, s.Dep, id, dep); err != nil {
			return err
		}
	}
	_, err := c.Exec(ctx, s.Wait, id, onFailure, o.c.DB.Time(now))
	return err
}

// CreateWorkflow implements driver.Workflows.
func (o *Ops[Q]) CreateWorkflow(ctx context.Context, p driver.CreateWorkflowParams) (*driver.WorkflowRow, []driver.InsertResult, error) {
	if Sequenced(p.Tasks) {
		return nil, nil, fmt.Errorf("create workflow: %w: a workflow's task cannot take a sequence", driver.ErrDependency)
	}
	if len(p.Graph) != len(p.Tasks) {
		return nil, nil, fmt.Errorf("create workflow: %d tasks, %d graph entries", len(p.Tasks), len(p.Graph))
	}
	s, db := o.c.SQL.Workflows, o.c.DB
	var (
		row   *driver.WorkflowRow
		out   []driver.InsertResult
		after func()
	)
	err := db.Commit(ctx, func(q Q) error {
		row, out, after = nil, nil, nil
		c := db.Conn(q)
		args := []any{p.Name, p.OnFailure, db.Time(p.Now)}
		var id int64
		var err error
		if s.LastID == "" {
			id, err = oneID(c.Rows(ctx, s.Insert, args...))
		} else if _, err = c.Exec(ctx, s.Insert, args...); err == nil {
			id, err = oneID(c.Rows(ctx, s.LastID))
		}
		if err != nil {
			return err
		}
		tasks := slices.Clone(p.Tasks)
		for i, g := range p.Graph {
			tasks[i].DependsOn = nil
			if len(g.Needs) > 0 {
				tasks[i].RunAt = driver.HeldUntil
			}
		}
		if out, after, err = o.c.InsertIn(ctx, q, tasks); err != nil {
			return err
		}
		for i, r := range out {
			if r.Duplicate {
				return fmt.Errorf("%w: task %q: its idempotency key is held by task %d (a workflow's tasks are always new)",
					driver.ErrDependency, p.Graph[i].Name, r.Task.ID)
			}
		}
		for i, g := range p.Graph {
			tid := out[i].Task.ID
			if len(g.Needs) > 0 {
				if err := o.fixHeld(ctx, q, out[i].Task, p.Now); err != nil {
					return err
				}
			}
			if _, err := c.Exec(ctx, s.Member, id, g.Name, tid); err != nil {
				return err
			}
			if len(g.Needs) == 0 {
				continue
			}
			deps := make([]int64, len(g.Needs))
			for j, n := range g.Needs {
				if n < 0 || n >= i {
					return fmt.Errorf("%w: task %q needs a task not before it", driver.ErrDependency, g.Name)
				}
				deps[j] = out[n].Task.ID
			}
			if err := o.hold(ctx, q, tid, deps, p.OnFailure, p.Now); err != nil {
				return err
			}
		}
		row, err = One(c.Rows(ctx, s.Get, id), s.Scan)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create workflow: %w", err)
	}
	if after != nil {
		after()
	}
	return row, out, nil
}

// GetWorkflow implements driver.Workflows.
func (o *Ops[Q]) GetWorkflow(ctx context.Context, id int64) (*driver.WorkflowRow, []driver.WorkflowNode, error) {
	s, db := o.c.SQL.Workflows, o.c.DB
	var (
		row   *driver.WorkflowRow
		nodes []driver.WorkflowNode
	)
	err := db.Read(ctx, func(q Q) error {
		row, nodes = nil, nil
		c := db.Conn(q)
		var err error
		if row, err = One(c.Rows(ctx, s.Get, id), s.Scan); err != nil || row == nil {
			return err
		}
		err = c.Rows(ctx, s.Members, id)(func(scan Scan) error {
			var n driver.WorkflowNode
			if err := scan(&n.Name, &n.TaskID); err != nil {
				return err
			}
			nodes = append(nodes, n)
			return nil
		})
		if err != nil || len(nodes) == 0 {
			return err
		}
		ids := make([]int64, len(nodes))
		for i, n := range nodes {
			ids[i] = n.TaskID
		}
		deps, err := o.deps(ctx, c, ids)
		for i := range nodes {
			for _, d := range deps[nodes[i].TaskID] {
				nodes[i].Needs = append(nodes[i].Needs, d.ID)
			}
		}
		return err
	})
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	for i := range nodes {
		t, err := s.Task(ctx, nodes[i].TaskID)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return nil, nil, fmt.Errorf("get workflow %d: %w", id, err)
		}
		nodes[i].Task = t
	}
	return row, nodes, nil
}

// deps reads the dependencies of the tasks ids, by task id, each by dep
// id.
func (o *Ops[Q]) deps(ctx context.Context, c Conn, ids []int64) (map[int64][]driver.Dep, error) {
	s := o.c.SQL.Workflows
	out := map[int64][]driver.Dep{}
	query, args := s.In(s.Deps, ids)
	err := c.Rows(ctx, query, args...)(func(scan Scan) error {
		var (
			task  int64
			d     driver.Dep
			state string
		)
		if err := scan(&task, &d.ID, &state, &d.Name); err != nil {
			return err
		}
		d.State = driver.State(state)
		out[task] = append(out[task], d)
		return nil
	})
	for _, l := range out {
		slices.SortFunc(l, func(a, b driver.Dep) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out, err
}

// ListWorkflows implements driver.Workflows.
func (o *Ops[Q]) ListWorkflows(ctx context.Context, f driver.WorkflowFilter) ([]driver.WorkflowRow, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	query, args := o.c.SQL.Workflows.List(f)
	out, err := Collect(o.c.DB.pool().Rows(ctx, query, args...), o.c.SQL.Workflows.Scan)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// WorkflowOf implements driver.Workflows.
func (o *Ops[Q]) WorkflowOf(ctx context.Context, id int64) (*driver.WorkflowRow, error) {
	row, err := One(o.c.DB.pool().Rows(ctx, o.c.SQL.Workflows.Of, id), o.c.SQL.Workflows.Scan)
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("workflow of task %d: %w", id, err)
	}
	return row, nil
}

// Waits implements driver.Workflows.
func (o *Ops[Q]) Waits(ctx context.Context, afterID int64, limit int) ([]driver.Wait, error) {
	s, db := o.c.SQL.Workflows, o.c.DB
	var out []driver.Wait
	err := db.Read(ctx, func(q Q) error {
		c := db.Conn(q)
		var err error
		if out, err = Collect(c.Rows(ctx, s.Waits, afterID, limit), scanWait); err != nil || len(out) == 0 {
			return err
		}
		ids := make([]int64, len(out))
		for i, w := range out {
			ids[i] = w.TaskID
		}
		deps, err := o.deps(ctx, c, ids)
		for i := range out {
			out[i].Deps = deps[out[i].TaskID]
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read held tasks: %w", err)
	}
	return out, nil
}

func scanWait(scan Scan) (*driver.Wait, error) {
	var (
		w     driver.Wait
		state string
		held  int64
	)
	if err := scan(&w.TaskID, &w.OnFailure, &state, &held); err != nil {
		return nil, err
	}
	w.State, w.Held = driver.State(state), held == 1
	return &w, nil
}

// Settle implements driver.Workflows: the wait row is locked first, so
// two settles of one task take turns and the second finds it gone; the
// task and its dependencies are read after the lock.
func (o *Ops[Q]) Settle(ctx context.Context, p driver.SettleParams) (driver.Verdict, error) {
	s, db := o.c.SQL.Workflows, o.c.DB
	var v driver.Verdict
	err := db.Commit(ctx, func(q Q) error {
		v = driver.Verdict{}
		c := db.Conn(q)
		w, err := One(c.Rows(ctx, s.LockWait, p.TaskID), scanWait)
		if err != nil || w == nil {
			return err
		}
		deps, err := o.deps(ctx, c, []int64{p.TaskID})
		if err != nil {
			return err
		}
		w.Deps = deps[p.TaskID]
		verdict := p.Decide(*w)
		switch verdict.Kind {
		case driver.Keep:
			return nil
		case driver.Release, driver.CancelHeld:
			changed, err := o.settleTask(ctx, q, p.TaskID, verdict, p.Now)
			if err != nil {
				return err
			}
			if !changed {
				verdict = driver.Verdict{Kind: driver.Drop}
			}
		}
		if _, err := c.Exec(ctx, s.DropWait, p.TaskID); err != nil {
			return err
		}
		// The dependencies of a task outside a workflow served its wait
		// alone; a workflow's are kept for its graph until it is pruned.
		if _, err := c.Exec(ctx, s.DropDeps, p.TaskID, p.TaskID); err != nil {
			return err
		}
		v = verdict
		return nil
	})
	if err != nil {
		return driver.Verdict{}, fmt.Errorf("settle held task %d: %w", p.TaskID, err)
	}
	return v, nil
}

// pruneChunk is how many tasks' dependency rows one statement of
// PruneWorkflows deletes.
const pruneChunk = 500

// PruneWorkflows implements driver.Workflows: in one transaction, the
// workflows of the page, then the dependency and task rows of the
// workflows gone in its range (those of earlier passes left none).
func (o *Ops[Q]) PruneWorkflows(ctx context.Context, p driver.PruneWorkflowsParams) (last, deleted int64, err error) {
	s, db := o.c.SQL.Workflows, o.c.DB
	err = db.Commit(ctx, func(q Q) error {
		last, deleted = 0, 0
		c := db.Conn(q)
		upTo, err := Collect(c.Rows(ctx, s.UpTo, p.After, p.Limit), func(scan Scan) (*sql.NullInt64, error) {
			var v sql.NullInt64
			return &v, scan(&v)
		})
		if err != nil || len(upTo) == 0 || !upTo[0].Valid {
			return err
		}
		last = upTo[0].Int64
		if deleted, err = c.Exec(ctx, s.Prune, p.After, last, db.Time(p.Before)); err != nil {
			return err
		}
		orphans, err := Collect(c.Rows(ctx, s.Orphans, p.After, last), scanInt64)
		if err != nil {
			return err
		}
		// By the ids read, not by range: a range would reach the rows of a
		// workflow whose creation commits meanwhile.
		for chunk := range slices.Chunk(orphans, pruneChunk) {
			for _, stmt := range []string{s.PruneDeps, s.DropOrphans} {
				query, args := s.In(stmt, chunk)
				if _, err := c.Exec(ctx, query, args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("prune workflows: %w", err)
	}
	return last, deleted, nil
}

// settleTask releases or cancels the held task id as v says, keeping the
// live counters right; it reports whether the task was still held.
func (o *Ops[Q]) settleTask(ctx context.Context, q Q, id int64, v driver.Verdict, now time.Time) (bool, error) {
	s, db := o.c.SQL.Workflows, o.c.DB
	c := db.Conn(q)
	var old RowState
	found := false
	err := c.Rows(ctx, s.Counted, id)(func(scan Scan) error {
		found = true
		return scan(&old.Queue, &old.Type, &old.Priority, &old.Attempt)
	})
	if err != nil || !found {
		return false, err
	}
	old.State, old.RunAt = driver.StatePending, driver.HeldUntil
	if now, err = o.txNow(ctx, q, now); err != nil {
		return false, err
	}
	now = now.UTC().Truncate(time.Microsecond)
	nu := old
	var n int64
	if v.Kind == driver.Release {
		nu.RunAt = now
		n, err = c.Exec(ctx, s.Release, db.Time(now), id)
	} else {
		nu.State = driver.StateCancelled
		var entry []byte
		entry, err = json.Marshal([]driver.AttemptError{{Attempt: old.Attempt, Start: now, End: now,
			Outcome: driver.OutcomeCancelled, Error: v.Reason}})
		if err == nil {
			n, err = c.Exec(ctx, s.Cancel, db.Time(now), string(entry), id)
		}
	}
	if err != nil || n == 0 {
		return false, err
	}
	if s.Count != nil {
		var t Tally
		t.Update(old, nu, now, false)
		if err := s.Count(ctx, q, &t); err != nil {
			return false, err
		}
	}
	return true, nil
}

// InQuestion is the {ids} of databases with "?" placeholders: one per id.
func InQuestion(query string, ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return strings.Replace(query, "{ids}", "("+strings.Repeat("?, ", len(ids)-1)+"?)", 1), args
}

// WorkflowList is ListWorkflows' query on a select of WorkflowColumns
// from keel_workflows, with mark the dialect's placeholder of the nth
// argument.
func WorkflowList(base string, f driver.WorkflowFilter, mark func(n int) string) (string, []any) {
	var args []any
	q := base
	if f.BeforeID > 0 {
		args = append(args, f.BeforeID)
		q += " WHERE id < " + mark(1)
	}
	args = append(args, f.Limit)
	return q + " ORDER BY id DESC LIMIT " + mark(len(args)), args
}

// WorkflowDialect is what WorkflowStatements needs of a driver's SQL.
type WorkflowDialect struct {
	// Prefix goes before each table name ("{schema}." on PostgreSQL).
	Prefix string
	// Mark is the placeholder of the nth argument (from 1).
	Mark func(n int) string
	// HeldAt is driver.HeldUntil as a literal of keel_tasks.run_at.
	HeldAt string
	// LockWait ends the read of one wait row that locks it; LockTask the
	// read of a held task that locks it (both empty on SQLite, whose single
	// writer serializes every write).
	LockWait, LockTask string
	// ByID follows keel_tasks in the locking read of a held task by id
	// (MySQL: its primary-key hint).
	ByID string
}

// WorkflowStatements are the workflow statements every database writes
// alike, in d's dialect; the driver adds Insert (LastID), Release, Cancel,
// In, List, Scan, Task, Now and Count.
func WorkflowStatements[Q any](d WorkflowDialect) WorkflowSQL[Q] {
	p, m := d.Prefix, d.Mark
	waits := `SELECT w.task_id, w.on_failure, coalesce(t.state, ''),
	CASE WHEN t.state = 'pending' AND t.run_at = ` + d.HeldAt + ` THEN 1 ELSE 0 END
FROM ` + p + `keel_waits w LEFT JOIN ` + p + `keel_tasks t ON t.id = w.task_id`
	return WorkflowSQL[Q]{
		Member: `INSERT INTO ` + p + `keel_workflow_tasks (workflow_id, name, task_id) VALUES (` + m(1) + `, ` + m(2) + `, ` + m(3) + `)`,
		Dep:    `INSERT INTO ` + p + `keel_deps (task_id, dep_id) VALUES (` + m(1) + `, ` + m(2) + `)`,
		Wait:   `INSERT INTO ` + p + `keel_waits (task_id, on_failure, created_at) VALUES (` + m(1) + `, ` + m(2) + `, ` + m(3) + `)`,
		Live:   `SELECT id FROM ` + p + `keel_tasks WHERE id IN {ids}`,
		Get:    `SELECT ` + WorkflowColumns + ` FROM ` + p + `keel_workflows WHERE id = ` + m(1),
		Of: `SELECT w.id, w.name, w.on_failure, w.created_at FROM ` + p + `keel_workflow_tasks wt
JOIN ` + p + `keel_workflows w ON w.id = wt.workflow_id WHERE wt.task_id = ` + m(1),
		Members: `SELECT name, task_id FROM ` + p + `keel_workflow_tasks WHERE workflow_id = ` + m(1) + ` ORDER BY task_id`,
		Deps: `SELECT d.task_id, d.dep_id, coalesce(t.state, a.state, ''), coalesce(wt.name, '')
FROM ` + p + `keel_deps d
LEFT JOIN ` + p + `keel_tasks t ON t.id = d.dep_id
LEFT JOIN ` + p + `keel_archive a ON a.id = d.dep_id
LEFT JOIN ` + p + `keel_workflow_tasks wt ON wt.task_id = d.dep_id
WHERE d.task_id IN {ids}`,
		Waits:    waits + ` WHERE w.task_id > ` + m(1) + ` ORDER BY w.task_id LIMIT ` + m(2),
		LockWait: waits + ` WHERE w.task_id = ` + m(1) + d.LockWait,
		Counted: `SELECT queue, type, priority, attempt FROM ` + p + `keel_tasks` + d.ByID + `
WHERE id = ` + m(1) + ` AND state = 'pending' AND run_at = ` + d.HeldAt + d.LockTask,
		Hold:     `UPDATE ` + p + `keel_tasks SET run_at = ` + d.HeldAt + ` WHERE id = ` + m(1),
		DropWait: `DELETE FROM ` + p + `keel_waits WHERE task_id = ` + m(1),
		DropDeps: `DELETE FROM ` + p + `keel_deps WHERE task_id = ` + m(1) + `
AND NOT EXISTS (SELECT 1 FROM ` + p + `keel_workflow_tasks wt WHERE wt.task_id = ` + m(2) + `)`,
		UpTo: `SELECT max(id) FROM (SELECT id FROM ` + p + `keel_workflows WHERE id > ` + m(1) + ` ORDER BY id LIMIT ` + m(2) + `) page`,
		Prune: `DELETE FROM ` + p + `keel_workflows WHERE id > ` + m(1) + ` AND id <= ` + m(2) + ` AND created_at < ` + m(3) + `
AND NOT EXISTS (SELECT 1 FROM ` + p + `keel_workflow_tasks wt WHERE wt.workflow_id = keel_workflows.id
	AND (EXISTS (SELECT 1 FROM ` + p + `keel_tasks t WHERE t.id = wt.task_id)
		OR EXISTS (SELECT 1 FROM ` + p + `keel_archive a WHERE a.id = wt.task_id)))`,
		Orphans: `SELECT wt.task_id FROM ` + p + `keel_workflow_tasks wt WHERE wt.workflow_id > ` + m(1) + ` AND wt.workflow_id <= ` + m(2) + `
AND NOT EXISTS (SELECT 1 FROM ` + p + `keel_workflows w WHERE w.id = wt.workflow_id)`,
		DropOrphans: `DELETE FROM ` + p + `keel_workflow_tasks WHERE task_id IN {ids}`,
		PruneDeps:   `DELETE FROM ` + p + `keel_deps WHERE task_id IN {ids}`,
	}
}
