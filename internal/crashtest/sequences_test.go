package crashtest

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// The sequence scenario: the members of 20 sequence keys, drained by three
// worker processes of which one is SIGKILLed again and again, run one at a
// time within each key, in enqueue order, while the keys run in parallel.

const (
	// seqType is the members' task type.
	seqType = "crash.seq"
	// seqKeys is how many sequence keys the scenario fills, seqMembers
	// how many members each key has.
	seqKeys    = 20
	seqMembers = 200
	// seqDelay is the shortest run of a member; they run up to four times
	// as long.
	seqDelay = 5 * time.Millisecond
)

// digits are the numbers in an error, which a failure's kind leaves out.
var digits = regexp.MustCompile(`[0-9]+`)

// seqJob is a member's payload: its key and its place in the key, from 0.
type seqJob struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// seq_runs has one row per completed run, written in the transaction that
// completes it; seq_starts one row per attempt that began, committed at
// once, so a killed attempt keeps its row. The times are microseconds
// since the epoch from the worker processes' clocks, all on the test's
// machine. Plain SQL every database takes.
const (
	seqRunsDDL = `CREATE TABLE seq_runs (task_id BIGINT NOT NULL, seq_key VARCHAR(64) NOT NULL, n INT NOT NULL,
	node VARCHAR(64) NOT NULL, attempt INT NOT NULL, started_at BIGINT NOT NULL, ended_at BIGINT NOT NULL)`
	seqStartsDDL = `CREATE TABLE seq_starts (task_id BIGINT NOT NULL, node VARCHAR(64) NOT NULL, attempt INT NOT NULL,
	started_at BIGINT NOT NULL)`
)

// newSequenceWorker is a worker of the members: the handler records the
// start of its attempt in seq_starts, sleeps from delay to 4×delay
// (watching its context), then records its run in seq_runs and its effect
// in effects and completes, all in one transaction: a run recorded is a
// run that completed. The end it records comes before that transaction,
// so before the next member of its key can be released.
func newSequenceWorker(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) (*keel.Client, error) {
	cfg := workerConfig(b, drv, db, node, delay)
	begun := b.rebind(`INSERT INTO seq_starts (task_id, node, attempt, started_at) VALUES (?, ?, ?, ?)`)
	effect := b.rebind(`INSERT INTO effects (task_id, node, attempt) VALUES (?, ?, ?)`)
	run := b.rebind(`INSERT INTO seq_runs (task_id, seq_key, n, node, attempt, started_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	keel.Handle(cfg.Handlers, seqType, func(ctx context.Context, task *keel.Task[seqJob]) error {
		started := time.Now()
		if _, err := db.ExecContext(ctx, begun, task.ID, node, task.Attempt, started.UnixMicro()); err != nil {
			return err
		}
		select {
		case <-time.After(delay + rand.N(3*delay)):
		case <-ctx.Done():
			return ctx.Err()
		}
		ended := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := tx.ExecContext(ctx, effect, task.ID, node, task.Attempt); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, run, task.ID, task.Args.Key, task.Args.N, node, task.Attempt,
			started.UnixMicro(), ended.UnixMicro()); err != nil {
			return err
		}
		if err := keel.CompleteTx(ctx, tx, nil); err != nil {
			return err
		}
		return tx.Commit()
	})
	return keel.NewClient(cfg)
}

// seqRun is a row of seq_runs, or of seq_starts (key, n and end unset).
type seqRun struct {
	task       int64
	key        string
	n          int
	node       string
	attempt    int
	start, end int64 // µs
}

// sequencesUnderKills: seqKeys keys of seqMembers members each, enqueued
// interleaved across the keys in four EnqueueMany calls: the first before
// the workers start, two while they run, the last once some key has
// drained (so that that key's first new member is enqueued ready, the
// other keys' held). Each member runs 5 to 20ms. Three worker processes
// drain them;
// one, not the leader, is SIGKILLed four times while it runs members, and
// restarted each time. While they run, no key ever has two members
// running or ready (sampled at every poll). At the end every member
// succeeded with its effect applied once (checkExactlyOnce), no member is
// left in its key's list, and:
//   - within each key the completed runs, by start, are the members in
//     enqueue order (n = 0, 1, …; task ids ascending), each once, and each
//     began after the one before it ended;
//   - every attempt that began (seq_starts, the killed ones too) began
//     after the member before it ended and before the member after it
//     began; an attempt that did not complete was running under a killed
//     process, and the member after it began after that kill;
//   - every failed attempt is a lease that expired under a killed worker,
//     after its kill, and the members each kill left running were
//     rescued; other failures are reported by kind (outcome and error),
//     except a lease that expired under a live worker that logged a slow
//     renewal: keel saw the database too slow for the lease (SQLite's one
//     write lock on a loaded machine), which is logged, not failed;
//   - the keys ran in parallel: runs of different keys overlapped.
func sequencesUnderKills(t *testing.T, b *backend) {
	e := setup(t, b)
	for _, ddl := range []string{seqRunsDDL, seqStartsDDL} {
		if _, err := e.db.ExecContext(e.ctx, ddl); err != nil {
			t.Fatalf("create the runs tables: %v", err)
		}
	}
	const kills = 4
	delay := seqDelay
	per := seqMembers
	total := int64(seqKeys * per)
	// As many attempts as the workers allow (workerConfig): a dead member
	// would hold its key, and on a loaded machine SQLite's live workers
	// lose leases (see the failed attempts below), at worst on one member
	// again and again: at load 24 the first members of 12 keys ran four
	// times, each attempt outliving its lease, and died at the default 4.
	c, err := keel.NewClient(keel.Config{Driver: e.drv, Types: []string{seqType}, MaxAttempts: 100})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, seqKeys)
	for k := range keys {
		keys[k] = fmt.Sprintf("key-%02d", k)
	}
	ids := map[string][]int64{} // each key's members, by n

	// enqueue enqueues members from to to-1 of every key in one call,
	// member n of every key before member n+1 of any, and returns the keys
	// whose member from was enqueued ready: the keys that were empty.
	enqueue := func(from, to int) []string {
		t.Helper()
		var specs []keel.TaskSpec
		for n := from; n < to; n++ {
			for _, k := range keys {
				specs = append(specs, keel.TaskSpec{Type: seqType, Payload: seqJob{Key: k, N: n}, Options: []keel.Option{keel.Sequence(k)}})
			}
		}
		infos, err := c.EnqueueMany(e.ctx, specs)
		if err != nil {
			t.Fatalf("enqueue members %d to %d: %v", from, to-1, err)
		}
		if len(infos) != len(specs) {
			t.Fatalf("enqueue members %d to %d: %d tasks, want %d", from, to-1, len(infos), len(specs))
		}
		var ready []string
		for i, info := range infos {
			k, n := keys[i%seqKeys], from+i/seqKeys
			if info.Sequence != k || info.State != keel.StatePending {
				t.Fatalf("member %d of %s: task %d in sequence %q, state %s", n, k, info.ID, info.Sequence, info.State)
			}
			if prev := ids[k]; len(prev) > 0 && info.ID <= prev[len(prev)-1] {
				t.Fatalf("member %d of %s: task %d, not after member %d (task %d)", n, k, info.ID, n-1, prev[len(prev)-1])
			}
			ids[k] = append(ids[k], info.ID)
			if !info.Held {
				if n != from {
					t.Fatalf("member %d of %s (task %d) enqueued ready behind member %d", n, k, info.ID, from)
				}
				ready = append(ready, k)
			}
		}
		return ready
	}

	// oneAtATime fails the test if a key has two members running or ready
	// (pending and not held) at once.
	heldArg := b.timeArg(driver.HeldUntil)
	samples := 0
	oneAtATime := func() {
		t.Helper()
		samples++
		bad := e.texts(`SELECT seq_key FROM keel_tasks
			WHERE seq_key IS NOT NULL AND (state = 'running' OR (state = 'pending' AND run_at <> ?))
			GROUP BY seq_key HAVING count(*) > 1`, heldArg)
		if len(bad) == 0 {
			return
		}
		var lines []string
		for _, k := range bad {
			for _, id := range e.ints(`SELECT id FROM keel_tasks WHERE seq_key = ? AND (state = 'running' OR (state = 'pending' AND run_at <> ?)) ORDER BY id`, k, heldArg) {
				r, err := e.drv.Get(e.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, fmt.Sprintf("%s: task %d state %s attempt %d run_at %v owner %q attempted_at %v",
					k, r.ID, r.State, r.Attempt, r.RunAt.Format(time.RFC3339Nano), r.LeaseOwner, r.AttemptedAt.Format(time.RFC3339Nano)))
			}
		}
		t.Fatalf("sample %d: keys with more than one member running or ready: %v\n%s", samples, bad, strings.Join(lines, "\n"))
	}
	wait := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		e.waitFor(what, timeout, func() bool { oneAtATime(); return cond() })
	}
	succeeded := func() int64 { return e.counts()[driver.StateSucceeded] }

	q := per / 4
	began := time.Now()
	if ready := enqueue(0, q); len(ready) != seqKeys {
		t.Fatalf("first enqueue: %d keys' first members ready, want all %d", len(ready), seqKeys)
	}
	// The test's reading of held (run_at = HeldUntil) agrees with keel's.
	if held := e.count(`SELECT count(*) FROM keel_tasks WHERE state = 'pending' AND run_at = ?`, heldArg); held != int64(seqKeys*(q-1)) {
		t.Fatalf("%d tasks held after the first enqueue, want %d", held, seqKeys*(q-1))
	}
	oneAtATime()

	workers := map[string]*worker{} // the live ones
	var all []*worker
	start := func(name string) {
		w := e.startWorkerMode("sequence", name, delay)
		workers[name] = w
		all = append(all, w)
	}
	for _, n := range []string{"s1", "s2", "s3"} {
		start(n)
	}
	readyMid := len(enqueue(q, 2*q)) + len(enqueue(2*q, 3*q))

	// kill waits for at members to succeed and for the victim, a worker
	// that is not the leader (whose rescuer and settler outlive every
	// kill), to run at least two members; it kills it and restarts it under
	// a new name, until a kill leaves members running to be rescued.
	slot := ""
	var victims []string
	killedAt := map[string]time.Time{} // every killed process, by name
	heldAll := map[int64]string{}      // the members a kill left running, by victim
	tries := 0
	kill := func(at int64) {
		t.Helper()
		for {
			tries++
			if tries > kills+4 {
				t.Fatalf("%d of %d kills left members to rescue", len(victims), tries-1)
			}
			wait(fmt.Sprintf("%d members to succeed", at), 90*time.Second, func() bool { return succeeded() >= at })
			var victim *worker
			wait("a non-leader worker running at least 2 members", 30*time.Second, func() bool {
				leader := e.leader()
				for n, w := range workers {
					if n != leader && (slot == "" || strings.HasPrefix(n, slot)) && len(e.runningOf(n)) >= 2 {
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
			killedAt[victim.Name] = e.kill(victim)
			time.Sleep(300 * time.Millisecond) // see internal/chaos killWorker
			held := e.runningOf(victim.Name)
			done := succeeded()
			t.Logf("kill %d: killed %s (leader %q) running %d members just before, holding %d after; %d of %d succeeded after %v",
				tries, victim.Name, e.leader(), before, len(held), done, total, time.Since(began).Round(time.Millisecond))
			if done >= total {
				t.Fatalf("kill %d landed after the drain: %d of %d members had succeeded", tries, done, total)
			}
			delete(workers, victim.Name)
			start(fmt.Sprintf("%s-r%d", slot, tries))
			if len(held) > 0 {
				victims = append(victims, victim.Name)
				for _, id := range held {
					heldAll[id] = victim.Name
				}
				return
			}
		}
	}
	for k := range kills - 1 {
		kill(total * int64(k+1) / (kills + 1))
	}
	// The last members go in once a key has drained: its first is
	// enqueued ready, the other keys' held.
	wait("a key to drain", 90*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM (SELECT seq_key FROM keel_tasks WHERE seq_key IS NOT NULL GROUP BY seq_key
			HAVING sum(CASE WHEN state = 'succeeded' THEN 0 ELSE 1 END) = 0) d`) > 0
	})
	readyLast := enqueue(3*q, per)
	if len(readyLast) == 0 {
		t.Fatal("the last enqueue, after a key drained, enqueued no key's first member ready")
	}
	kill(total * kills / (kills + 1))

	wait(fmt.Sprintf("all %d members to succeed", total), 120*time.Second, func() bool { return succeeded() == total })
	drained := time.Since(began)
	oneAtATime()
	e.checkExactlyOnce(total)
	if left := e.count(`SELECT count(*) FROM keel_sequence_members`); left != 0 {
		t.Fatalf("%d members still listed in their keys after every member succeeded", left)
	}

	// The completed runs: per key, by start, the members in enqueue order,
	// each starting after the one before it ended.
	runs := e.seqRows(`SELECT task_id, seq_key, n, node, attempt, started_at, ended_at FROM seq_runs`, true)
	byKey := map[string][]seqRun{}
	runOf := map[int64]seqRun{}
	for _, r := range runs {
		byKey[r.key] = append(byKey[r.key], r)
		runOf[r.task] = r
	}
	if len(byKey) != seqKeys || len(runOf) != int(total) || len(runs) != int(total) {
		t.Fatalf("%d runs of %d tasks in %d keys, want %d runs, one per member, in %d keys", len(runs), len(runOf), len(byKey), total, seqKeys)
	}
	for _, k := range keys {
		rs := byKey[k]
		slices.SortFunc(rs, func(a, b seqRun) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.n, b.n)) })
		for i, r := range rs {
			if r.n != i || r.task != ids[k][i] {
				t.Fatalf("key %s: run %d (by start, at %d µs) was member %d (task %d), want member %d (task %d): out of enqueue order",
					k, i, r.start, r.n, r.task, i, ids[k][i])
			}
			if r.end < r.start {
				t.Fatalf("key %s: member %d (task %d) ended at %d µs, before it started at %d", k, r.n, r.task, r.end, r.start)
			}
			if i > 0 && r.start < rs[i-1].end {
				p := rs[i-1]
				t.Fatalf("key %s: member %d (task %d, attempt %d on %s) started at %d µs, %d µs before member %d (task %d, attempt %d on %s) ended at %d µs",
					k, r.n, r.task, r.attempt, r.node, r.start, p.end-r.start, p.n, p.task, p.attempt, p.node, p.end)
			}
		}
	}

	// The failed attempts: leases that expired under a killed worker, and
	// nothing else. Other failures are reported by kind.
	rescued := map[string]int{}
	retried := map[int64]driver.TaskRow{}
	other := map[string][]int64{} // the tasks of other failures, by outcome and error
	slow := map[string]bool{}     // the processes that logged a slow lease renewal
	for _, w := range all {
		slow[w.Name] = len(logLines(w.Stderr.String(), "lease renewal slow")) > 0
	}
	starved := map[string]int{} // leases lost by live workers that logged a slow renewal
	for _, r := range e.retried() {
		retried[r.ID] = r
		if len(r.Errors) == 0 {
			t.Errorf("task %d: attempt %d, but no failed attempt before it", r.ID, r.Attempt)
		}
		for _, ae := range r.Errors {
			if ae.Outcome != driver.OutcomeLeaseExpired || !slices.Contains(victims, ae.Node) || ae.End.Before(killedAt[ae.Node]) {
				if ae.Outcome == driver.OutcomeLeaseExpired && slow[ae.Node] {
					starved[ae.Node]++
					continue
				}
				kind := fmt.Sprintf("%s (%s)", ae.Outcome, digits.ReplaceAllString(ae.Error, "N"))
				if ae.Outcome == driver.OutcomeLeaseExpired {
					kind += " under a worker not killed, or before its kill"
				}
				other[kind] = append(other[kind], r.ID)
				continue
			}
			rescued[ae.Node]++
			if fin := runOf[r.ID]; fin.start < killedAt[ae.Node].UnixMicro() {
				t.Errorf("task %d: its completed attempt %d started at %d µs, before the kill of %s, which it was rescued from, at %d µs",
					r.ID, fin.attempt, fin.start, ae.Node, killedAt[ae.Node].UnixMicro())
			}
		}
	}
	for kind, tasks := range other {
		slices.Sort(tasks)
		t.Errorf("%d attempts failed with %s, of tasks %v…; only the kills of %v should fail attempts",
			len(tasks), kind, tasks[:min(len(tasks), 8)], victims)
	}
	for _, v := range victims {
		if rescued[v] == 0 {
			t.Errorf("no member killed with %s was rescued", v)
		}
	}
	notRescued := 0
	for id, v := range heldAll {
		if _, ok := retried[id]; !ok {
			if r := runOf[id]; r.node != v {
				t.Errorf("member %d was running under %s at the kill but was not rescued (run by %q)", id, v, r.node)
			}
			notRescued++
		}
	}

	// Every attempt that began, the killed ones too: after the member
	// before it ended and before the member after it began; one that did
	// not complete ran under a killed process, and the member after it
	// began after the kill.
	type place struct {
		key string
		n   int
	}
	member := map[int64]place{}
	for k, ts := range ids {
		for n, id := range ts {
			member[id] = place{k, n}
		}
	}
	starts := e.seqRows(`SELECT task_id, node, attempt, started_at FROM seq_starts`, false)
	finals, killedStarts := 0, 0
	for _, s := range starts {
		m, ok := member[s.task]
		if !ok {
			t.Fatalf("an attempt of task %d, which is no member", s.task)
		}
		fin, rs := runOf[s.task], byKey[m.key]
		switch {
		case s.attempt == fin.attempt:
			if s.node != fin.node || s.start != fin.start {
				t.Errorf("task %d: completed attempt %d began on %s at %d µs, but its run says %s at %d µs", s.task, s.attempt, s.node, s.start, fin.node, fin.start)
			}
			finals++
		case s.attempt < fin.attempt:
			i := slices.IndexFunc(retried[s.task].Errors, func(ae driver.AttemptError) bool { return ae.Attempt == s.attempt })
			if i < 0 {
				t.Errorf("task %d: attempt %d began on %s at %d µs, did not complete and did not fail", s.task, s.attempt, s.node, s.start)
				continue
			}
			at, killed := killedAt[s.node]
			if ae := retried[s.task].Errors[i]; ae.Outcome != driver.OutcomeLeaseExpired || ae.Node != s.node || !killed || ae.End.Before(at) {
				break // a failure reported with the others above
			}
			killedStarts++
			if s.start > at.UnixMicro() {
				t.Errorf("task %d: attempt %d began on %s at %d µs, after the kill of %s at %d µs", s.task, s.attempt, s.node, s.start, s.node, at.UnixMicro())
			}
			if m.n+1 < per && rs[m.n+1].start < at.UnixMicro() {
				t.Errorf("key %s: member %d (task %d) started at %d µs, while member %d (task %d) still ran on %s, killed at %d µs",
					m.key, m.n+1, rs[m.n+1].task, rs[m.n+1].start, m.n, s.task, s.node, at.UnixMicro())
			}
		default:
			t.Errorf("task %d: attempt %d began on %s, after its completed attempt %d", s.task, s.attempt, s.node, fin.attempt)
		}
		if m.n > 0 && s.start < rs[m.n-1].end {
			t.Errorf("key %s: attempt %d of member %d (task %d) began on %s at %d µs, before member %d (task %d) ended at %d µs",
				m.key, s.attempt, m.n, s.task, s.node, s.start, m.n-1, rs[m.n-1].task, rs[m.n-1].end)
		}
		if m.n+1 < per && s.start >= rs[m.n+1].start {
			t.Errorf("key %s: attempt %d of member %d (task %d) began on %s at %d µs, after member %d (task %d) began at %d µs",
				m.key, s.attempt, m.n, s.task, s.node, s.start, m.n+1, rs[m.n+1].task, rs[m.n+1].start)
		}
	}
	if finals != int(total) {
		t.Errorf("%d completed attempts recorded their start, want %d", finals, total)
	}

	// The keys ran in parallel: how many ran at once, at most and on
	// average over the drain (runs of one key never overlap).
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	var busy, first, last int64
	for i, r := range runs {
		edges = append(edges, edge{r.start, 1}, edge{r.end, -1})
		busy += r.end - r.start
		if i == 0 || r.start < first {
			first = r.start
		}
		last = max(last, r.end)
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	running, most := 0, 0
	for _, ed := range edges {
		running += ed.delta
		most = max(most, running)
	}
	if most < 2 {
		t.Fatalf("no two keys ever ran at the same time (at most %d at once)", most)
	}
	if len(starved) > 0 {
		t.Logf("leases lost by live workers whose renewals were slow (the database too slow for the lease, not a kill): %v", starved)
	}
	t.Logf("%d keys × %d members drained in %v (%d members a second); %d kills rescued (lease_expired per killed worker %v; %d held members completed as the kill landed; %d killed attempts had begun), no failure else; keys ran %d at most at once, %.1f on average; %d keys were empty and started at once when the last members came (%d in the middle enqueues); at most one member running or ready per key in %d samples",
		seqKeys, per, drained.Round(time.Millisecond), int64(float64(total)/drained.Seconds()), len(victims), rescued, notRescued, killedStarts,
		most, float64(busy)/float64(max(last-first, 1)), len(readyLast), readyMid, samples)
}

// seqRows reads rows of seq_runs (full) or of seq_starts.
func (e *env) seqRows(query string, full bool) []seqRun {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, query)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []seqRun
	for rows.Next() {
		var r seqRun
		if full {
			err = rows.Scan(&r.task, &r.key, &r.n, &r.node, &r.attempt, &r.start, &r.end)
		} else {
			err = rows.Scan(&r.task, &r.node, &r.attempt, &r.start)
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// texts runs a query returning one text column.
func (e *env) texts(query string, args ...any) []string {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, e.b.rebind(query), args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}
