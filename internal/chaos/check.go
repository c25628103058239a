package chaos

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// waitFor polls cond every 50ms until it holds, or fails after timeout
// (never past the scenario's deadline).
func (r *run) waitFor(what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	if deadline.After(r.deadline) {
		deadline = r.deadline
	}
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// count runs a query returning one number; %s in query is the space's
// keel_tasks, qualified.
func (r *run) count(query string, args ...any) (int, error) {
	var n int
	err := r.db.QueryRowContext(r.ctx, r.sp.rebind(fmt.Sprintf(query, r.sp.table("keel_tasks"))), args...).Scan(&n)
	return n, err
}

// finished is how many of the scenario's tasks are no longer pending or
// running.
func (r *run) finished() (int, error) {
	return r.count(`SELECT count(*) FROM %s WHERE queue <> '` + keel.ReservedQueue + `' AND state NOT IN ('pending', 'running')`)
}

// succeededAtLeast waits for n tasks to have finished.
func (r *run) finishedAtLeast(n int, timeout time.Duration) error {
	return r.waitFor(fmt.Sprintf("%d tasks to finish", n), timeout, func() (bool, error) {
		f, err := r.finished()
		return f >= n, err
	})
}

// ints runs a query returning one integer column; %s as in count.
func (r *run) ints(query string, args ...any) ([]int64, error) {
	rows, err := r.db.QueryContext(r.ctx, r.sp.rebind(fmt.Sprintf(query, r.sp.table("keel_tasks"))), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// runningOf returns the tasks running under node.
func (r *run) runningOf(node string) ([]int64, error) {
	return r.ints(`SELECT id FROM %s WHERE state = 'running' AND lease_owner = ? ORDER BY id`, node)
}

// leader returns the node holding the maintenance lease, or "".
func (r *run) leader() (string, error) {
	var owner string
	err := r.db.QueryRowContext(r.ctx, r.sp.rebind(`SELECT owner FROM `+r.sp.table("keel_leaders")+` WHERE name = 'maintenance' AND expires_at > ?`),
		r.sp.timeArg(time.Now())).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// busyWorker waits for a worker of ps holding at least min tasks, not the
// leader unless notLeader is false, and returns it.
func (r *run) busyWorker(ps []*proc, least int, notLeader bool) (*proc, error) {
	if r.atOnce(2) < 2 {
		// Every work type is capped (Options.Types): one process may hold
		// every slot, since a worker that finishes a task claims the next
		// at once while the others poll, and that process may be the
		// leader.
		notLeader = false
	}
	var victim *proc
	err := r.waitFor("a worker with running tasks", 30*time.Second, func() (bool, error) {
		leader, err := r.leader()
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if !p.alive() || notLeader && p.node == leader && len(ps) > 1 {
				continue
			}
			held, err := r.runningOf(p.node)
			if err != nil {
				return false, err
			}
			if len(held) >= least {
				victim = p
				return true, nil
			}
		}
		return false, nil
	})
	return victim, err
}

// rescues reads the lease_expired entries of node's attempts: how many
// tasks were rescued from it and the latest rescue after since.
func (r *run) rescues(node string, since time.Time) (n int, last time.Duration, err error) {
	ids, err := r.ints(`SELECT id FROM %s WHERE attempt > 1 ORDER BY id`)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		t, err := r.drv.Get(r.ctx, id)
		if err != nil {
			return 0, 0, err
		}
		for _, ae := range t.Errors {
			if ae.Outcome == driver.OutcomeLeaseExpired && ae.Node == node {
				n++
				last = max(last, ae.End.Sub(since))
			}
		}
	}
	return n, last, nil
}

// settle waits until every task finished or the scenario's time ran out,
// then checks every task against the ledger.
func (r *run) settle() error {
	err := r.finishedAtLeast(r.res.Tasks, time.Until(r.deadline))
	if err != nil && r.ctx.Err() != nil {
		return err
	}
	return r.audit()
}

// audit checks every task the scenario enqueued: it must have succeeded
// with exactly one ledger row (written in its completion's transaction).
// It counts the lost (missing, dead, cancelled, or succeeded without its
// effect), the applied twice (more than one committed effect), the stuck
// (still pending or running), and effects of no task; and it has the
// driver check its live counters against the task table.
func (r *run) audit() error {
	states := map[int64]string{}
	rows, err := r.db.QueryContext(r.ctx, `SELECT id, state FROM `+r.sp.table("keel_tasks")+` WHERE queue <> '`+keel.ReservedQueue+`'`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			rows.Close()
			return err
		}
		states[id] = st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	effects := map[int64]int{}
	rows, err = r.db.QueryContext(r.ctx, `SELECT task_id, count(*) FROM `+r.sp.table(ledger)+` GROUP BY task_id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return err
		}
		effects[id] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var lost, twice, stuck []int64
	for _, id := range r.ids {
		st, ok := states[id]
		switch {
		case !ok:
			lost = append(lost, id)
		case effects[id] > 1:
			twice = append(twice, id)
		case st == string(driver.StatePending) || st == string(driver.StateRunning):
			stuck = append(stuck, id)
		case st != string(driver.StateSucceeded) || effects[id] != 1:
			lost = append(lost, id)
		default:
			r.res.Succeeded++
		}
	}
	r.res.Lost, r.res.Twice, r.res.Stuck = len(lost), len(twice), len(stuck)
	show := func(ids []int64) []int64 { return ids[:min(len(ids), 5)] }
	if len(lost) > 0 {
		r.failf("%d tasks lost (missing, dead, cancelled or succeeded without their effect), e.g. %v", len(lost), show(lost))
	}
	if len(twice) > 0 {
		r.failf("%d tasks applied more than once (more than one committed effect), e.g. %v", len(twice), show(twice))
	}
	if len(stuck) > 0 {
		r.failf("%d tasks stuck: not finished %v into the scenario, e.g. %v", len(stuck), r.o.Duration, show(stuck))
	}
	var orphans []int64
	for id := range effects {
		if !slices.Contains(r.ids, id) {
			orphans = append(orphans, id)
		}
	}
	if len(orphans) > 0 {
		r.failf("%d effects of no task the scenario enqueued, e.g. %v", len(orphans), show(orphans))
	}
	if err := r.checkLimits(); err != nil {
		return fmt.Errorf("check the types' limits: %w", err)
	}
	fixed, err := r.drv.Reconcile(r.ctx, driver.ReconcileParams{})
	if err != nil {
		return fmt.Errorf("reconcile the counters: %w", err)
	}
	if len(fixed) != 0 {
		r.failf("the live counters had drifted from the task table: corrections %+v", fixed)
	}
	return nil
}
