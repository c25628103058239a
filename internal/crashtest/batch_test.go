package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver"
)

// The batch scenario: a batch drained by worker processes, one of which is
// SIGKILLed again and again, finishes once, after its last member, with
// exact counts.

// batchDoneType is the batch's on_success callback.
const batchDoneType = "crash.batch.done"

// batchCallsDDL is the table the callback's handler writes what it saw
// into, in the transaction that completes it: one row per completed run.
// Plain SQL every database takes.
const batchCallsDDL = `CREATE TABLE batch_calls (task_id BIGINT NOT NULL, node VARCHAR(64) NOT NULL,
	attempt INT NOT NULL, open_members BIGINT NOT NULL, succeeded BIGINT NOT NULL, unsucceeded BIGINT NOT NULL)`

// batchData is the payload the callback is given, carried in its
// batch.Event's Data.
type batchData struct {
	Marker string `json:"marker"`
}

// newBatchWorker is newWorker (the members' handler records their effect
// with CompleteTx) that also handles the batch's callback: it reads the
// batch (batch.Get: its pending and running members) and counts the
// members not succeeded in the task table, then records what it saw in
// batch_calls and its effect in effects, and completes, all in one
// transaction.
func newBatchWorker(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) (*keel.Client, error) {
	cfg := workerConfig(b, drv, db, node, delay)
	effect := b.rebind(`INSERT INTO effects (task_id, node, attempt) VALUES (?, ?, ?)`)
	call := b.rebind(`INSERT INTO batch_calls (task_id, node, attempt, open_members, succeeded, unsucceeded) VALUES (?, ?, ?, ?, ?, ?)`)
	unsucceeded := b.rebind(`SELECT count(*) FROM keel_tasks WHERE batch_id = ? AND state <> 'succeeded'`)
	var c *keel.Client
	keel.Handle(cfg.Handlers, batchDoneType, func(ctx context.Context, task *keel.Task[batch.Event]) error {
		info, err := batch.Get(ctx, c, task.Args.BatchID)
		if err != nil {
			return err
		}
		var left int64
		if err := db.QueryRowContext(ctx, unsucceeded, task.Args.BatchID).Scan(&left); err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := tx.ExecContext(ctx, effect, task.ID, node, task.Attempt); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, call, task.ID, node, task.Attempt, info.Pending+info.Running, info.Succeeded, left); err != nil {
			return err
		}
		if err := keel.CompleteTx(ctx, tx, nil); err != nil {
			return err
		}
		return tx.Commit()
	})
	var err error
	c, err = keel.NewClient(cfg)
	return c, err
}

// batchUnderKills: one batch of b.batchTasks members (5,000; 2,000 on
// SQLite) with an on_success callback is drained by three worker
// processes; one of them, not the leader, is SIGKILLed five times while
// it runs members (a kill that finds it holding none is tried again), and
// restarted each time. Every member succeeds with its effect applied
// exactly once (the rule of checkExactlyOnce: one effect row per task,
// written by its final attempt), no attempt failed other than by the
// kills, and the tasks the victims held were rescued. The leader finishes
// the batch once: it is finished with exact counts and its OnSuccessID,
// one finish is logged, and exactly one task of the callback's type
// exists, a while after the finish too. The callback ran once (one
// effect, one batch_calls row); it was enqueued after the last member
// finished, and its handler saw no member pending or running
// (batch.Get) and none not succeeded (the task table); its batch.Event
// carries the batch, on_success, the exact counts and the payload it was
// given.
func batchUnderKills(t *testing.T, b *backend) {
	e := setup(t, b)
	if _, err := e.db.ExecContext(e.ctx, batchCallsDDL); err != nil {
		t.Fatalf("create batch_calls: %v", err)
	}
	const kills = 5
	total := int64(b.batchTasks)
	const delay = 100 * time.Millisecond
	c, err := keel.NewClient(keel.Config{Driver: e.drv, Types: []string{taskType, batchDoneType}})
	if err != nil {
		t.Fatal(err)
	}
	members := make([]keel.TaskSpec, total)
	for i := range members {
		members[i] = keel.TaskSpec{Type: taskType, Payload: job{N: i}}
	}
	data := batchData{Marker: "batch-under-kills"}
	began := time.Now()
	bi, infos, err := batch.Enqueue(e.ctx, c, batch.Spec{Tasks: members, OnSuccess: &keel.TaskSpec{Type: batchDoneType, Payload: data}})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(infos)) != total || bi.Total != total || bi.State != batch.Running {
		t.Fatalf("batch.Enqueue: %d tasks, batch %+v; want %d members, running", len(infos), bi, total)
	}
	t.Logf("batch %d of %d members enqueued in %v", bi.ID, total, time.Since(began).Round(time.Millisecond))

	workers := map[string]*worker{} // the live ones
	var all []*worker
	start := func(name string) {
		w := e.startWorkerMode("batch", name, delay)
		workers[name] = w
		all = append(all, w)
	}
	for _, n := range []string{"k1", "k2", "k3"} {
		start(n)
	}
	// Kill k waits for k/(kills+1) of the members to succeed, so that the
	// kills are spread over the drain (the last lands near its end, so
	// that the members it leaves behind are among the last to finish),
	// and for the victim, a worker that
	// is not the leader (whose rescuer outlives every kill), to be running
	// members; it is restarted under a new name.
	slot := ""
	var victims []string
	heldAll := map[int64]string{} // the members a kill left running, by victim
	for k := 1; len(victims) < kills; k++ {
		if k > kills+3 {
			t.Fatalf("%d of %d kills left members to rescue", len(victims), k-1)
		}
		at := total * int64(len(victims)+1) / (kills + 1)
		e.waitFor(fmt.Sprintf("%d members to succeed", at), 60*time.Second, func() bool {
			return e.counts()[driver.StateSucceeded] >= at
		})
		var victim *worker
		e.waitFor("a non-leader worker running at least 4 members", 30*time.Second, func() bool {
			leader := e.leader()
			for n, w := range workers {
				if n != leader && (slot == "" || strings.HasPrefix(n, slot)) && len(e.runningOf(n)) >= 4 {
					victim = w
					return true
				}
			}
			return false
		})
		if slot == "" {
			slot = victim.Name
		}
		before := len(e.runningOf(victim.Name))
		e.kill(victim)
		time.Sleep(300 * time.Millisecond) // see internal/chaos killWorker
		held := e.runningOf(victim.Name)
		done := e.counts()[driver.StateSucceeded]
		t.Logf("kill %d: killed %s (leader %q) running %d members just before, holding %d after; %d of %d succeeded after %v",
			k, victim.Name, e.leader(), before, len(held), done, total, time.Since(began).Round(time.Millisecond))
		if done >= total {
			t.Fatalf("kill %d landed after the drain: %d of %d members had succeeded", k, done, total)
		}
		if len(held) > 0 {
			victims = append(victims, victim.Name)
			for _, id := range held {
				heldAll[id] = victim.Name
			}
		}
		delete(workers, victim.Name)
		start(fmt.Sprintf("%s-r%d", slot, k))
	}

	// The members, then the callback.
	e.waitFor(fmt.Sprintf("all %d members and the callback to succeed", total), 90*time.Second, func() bool {
		return e.counts()[driver.StateSucceeded] == total+1
	})
	drained := time.Since(began)
	info, err := batch.Get(e.ctx, c, bi.ID)
	if err != nil {
		t.Fatal(err)
	}
	// A second finish would enqueue a second callback within a pass of
	// the leader's finisher: wait two, then count.
	time.Sleep(2*time.Second + 500*time.Millisecond)
	e.checkExactlyOnce(total + 1)

	// The batch: finished once, with exact counts.
	if info.State != batch.Finished || info.Total != total || info.Succeeded != total || info.Dead != 0 ||
		info.Cancelled != 0 || info.Pending != 0 || info.Running != 0 || info.OnSuccessID == 0 || info.OnFinishID != 0 ||
		info.FinishedAt.IsZero() || info.Progress != 1 {
		t.Fatalf("batch %+v; want finished, %d members all succeeded, an on_success callback and no on_finish", *info, total)
	}
	if again, err := batch.Get(e.ctx, c, bi.ID); err != nil {
		t.Fatal(err)
	} else if again.OnSuccessID != info.OnSuccessID || !again.FinishedAt.Equal(info.FinishedAt) {
		t.Fatalf("the batch changed after it finished: %+v, then %+v", *info, *again)
	}

	// One finish, logged once by the leader that made it.
	var finishes []string
	for _, w := range all {
		for _, l := range logLines(w.Stderr.String(), "keel: batch finished", fmt.Sprintf("batch=%d ", bi.ID)) {
			finishes = append(finishes, w.Name+": "+l)
		}
	}
	if len(finishes) != 1 || !strings.Contains(finishes[0], fmt.Sprintf("on_success=%d ", info.OnSuccessID)) {
		t.Fatalf("the workers logged %d finishes of batch %d, want one naming on_success %d:\n%s",
			len(finishes), bi.ID, info.OnSuccessID, strings.Join(finishes, "\n"))
	}

	// Exactly one task of the callback's type: the batch's.
	callbacks, err := c.List(e.ctx, keel.Filter{Type: batchDoneType, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(callbacks) != 1 || callbacks[0].ID != info.OnSuccessID {
		var ids []int64
		for _, cb := range callbacks {
			ids = append(ids, cb.ID)
		}
		t.Fatalf("tasks of type %s: %v, want only the batch's on_success %d", batchDoneType, ids, info.OnSuccessID)
	}
	cb, err := c.Get(e.ctx, info.OnSuccessID)
	if err != nil {
		t.Fatal(err)
	}
	if cb.State != keel.StateSucceeded {
		t.Fatalf("callback %d: state %s, want succeeded", cb.ID, cb.State)
	}
	var ev batch.Event
	if err := json.Unmarshal(cb.Payload, &ev); err != nil {
		t.Fatalf("callback %d: payload %s: %v", cb.ID, cb.Payload, err)
	}
	var gotData batchData
	if err := json.Unmarshal(ev.Data, &gotData); err != nil || gotData != data {
		t.Fatalf("callback %d: data %s (%v), want %+v", cb.ID, ev.Data, err, data)
	}
	if ev.BatchID != bi.ID || ev.Kind != "on_success" || ev.Total != total || ev.Succeeded != total || ev.Dead != 0 || ev.Cancelled != 0 {
		t.Fatalf("callback %d: event %+v, want batch %d, on_success, %d members all succeeded", cb.ID, ev, bi.ID, total)
	}

	// Every member: in the batch, succeeded; the callback was enqueued,
	// and the batch finished, after the last of them finished.
	var n int64
	var last time.Time
	var lastID, after int64
	for {
		page, err := batch.Members(e.ctx, c, bi.ID, after, driver.MaxBatchMembersPage)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			after = m.ID
			n++
			if m.BatchID != bi.ID || m.State != keel.StateSucceeded || m.Type != taskType {
				t.Fatalf("member %d: batch %d, type %s, state %s; want batch %d, %s, succeeded", m.ID, m.BatchID, m.Type, m.State, bi.ID, taskType)
			}
			if m.FinishedAt.After(last) {
				last, lastID = m.FinishedAt, m.ID
			}
		}
	}
	if n != total {
		t.Fatalf("the batch lists %d members, want %d", n, total)
	}
	if cb.CreatedAt.Before(last) || info.FinishedAt.Before(last) || cb.AttemptedAt.Before(last) {
		t.Fatalf("callback %d enqueued at %v (first attempt at %v), batch finished at %v: before the last member, %d, finished at %v",
			cb.ID, cb.CreatedAt, cb.AttemptedAt, info.FinishedAt, lastID, last)
	}

	// What the callback's handler saw, recorded with its completion: one
	// run, no member pending, running or not succeeded.
	rows, err := e.db.QueryContext(e.ctx, `SELECT task_id, node, attempt, open_members, succeeded, unsucceeded FROM batch_calls`)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		task                       int64
		node                       string
		attempt                    int
		open, succeeded, unsucceed int64
	}
	defer rows.Close()
	var calls []seen
	for rows.Next() {
		var s seen
		if err := rows.Scan(&s.task, &s.node, &s.attempt, &s.open, &s.succeeded, &s.unsucceed); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(calls) != 1 || calls[0].task != cb.ID || calls[0].attempt != cb.Attempt || calls[0].open != 0 ||
		calls[0].succeeded != total || calls[0].unsucceed != 0 {
		t.Fatalf("the callback's runs saw %+v; want one run of task %d (attempt %d) seeing 0 members pending or running, %d succeeded, 0 not succeeded",
			calls, cb.ID, cb.Attempt, total)
	}

	// The kills were rescued: every failed attempt is a lease that expired
	// under a killed worker, and the members each kill left running were
	// rescued.
	rescued := map[string]int{}
	retried := map[int64]bool{}
	for _, r := range e.retried() {
		retried[r.ID] = true
		for _, ae := range r.Errors {
			if ae.Outcome != driver.OutcomeLeaseExpired || !slices.Contains(victims, ae.Node) {
				t.Errorf("task %d: attempt %d failed under %s with %s (%q); only the kills of %v should fail attempts",
					r.ID, ae.Attempt, ae.Node, ae.Outcome, ae.Error, victims)
			}
			rescued[ae.Node]++
		}
	}
	for _, v := range victims {
		if rescued[v] == 0 {
			t.Errorf("no member killed with %s was rescued", v)
		}
	}
	// A member running under a victim at its death was rescued, unless
	// its completion was already committing when the kill landed.
	notRescued := 0
	for id, v := range heldAll {
		if !retried[id] {
			var node string
			if err := e.db.QueryRowContext(e.ctx, b.rebind(`SELECT node FROM effects WHERE task_id = ?`), id).Scan(&node); err != nil {
				t.Fatal(err)
			}
			if node != v {
				t.Errorf("member %d was running under %s at the kill but was not rescued (effect by %q)", id, v, node)
			}
			notRescued++
		}
	}
	t.Logf("%d kills rescued (lease_expired per killed worker %v; %d held members completed as the kill landed); all %d members succeeded once %v after the enqueue; batch %d finished at %v, %v after the last member (%d, rescued: %v); callback %d enqueued once, ran once on %s",
		len(victims), rescued, notRescued, total, drained.Round(time.Millisecond), bi.ID, info.FinishedAt.Format(time.RFC3339Nano),
		info.FinishedAt.Sub(last).Round(time.Millisecond), lastID, retried[lastID], cb.ID, calls[0].node)
}
