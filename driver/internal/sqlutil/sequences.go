package sqlutil

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
)

// SequenceSQL are a driver's sequence statements, each taking its
// arguments in the order named:
//   - Upsert (key, skip dead, now, now) creates or updates a key's row, locking
//     it; Lock (key) locks it and selects its skip_dead;
//   - Count (key) counts the key's members, reading what is committed now
//     (MySQL's REPEATABLE READ would read an older snapshot);
//   - AddMember (key, task id) and DropMember (key, task id);
//   - SetKey (key, run at, task id) writes a just inserted member's seq_key
//     and run time;
//   - Head (held run time, key, limit) selects the key's first members, by
//     id: task id, state (NULL once the task left keel_tasks), queue, type,
//     priority, attempt and whether it is held (1 or 0);
//   - Release (run at, now, task id, held run time) releases a held task;
//   - Candidates (held run time, limit) selects keys whose first member is
//     not running or ready: finished, gone, held, or dead under skip_dead;
//   - Prune (before) deletes the rows of keys with no member left that no
//     enqueue touched since before;
//   - Blocked (after key, limit) selects the keys held by a dead first
//     member: key, dead task id, its finish time, members waiting.
//
// ScanBlocked reads a row of Blocked.
type SequenceSQL struct {
	Upsert, Lock, Count, AddMember, DropMember, SetKey, Head, Release, Candidates, Prune, Blocked string
	ScanBlocked                                                                                   func(Scan) (*driver.BlockedSequence, error)
}

// Sequenced reports whether any of params has a sequence key.
func Sequenced(params []driver.InsertParams) bool {
	return slices.ContainsFunc(params, func(p driver.InsertParams) bool { return p.Sequence != "" })
}

// SequencedTask reports whether t finishes a member of a sequence: its
// finish then settles the key (SettleFinished).
func SequencedTask(t driver.Transition) bool { return t.Task != nil && t.Task.Sequence != "" }

// InsertSequenced implements Insert of tasks among which some have a
// sequence key, in a transaction of its own.
func (o *Ops[Q]) InsertSequenced(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	return o.insertWith(ctx, nil, params, o.insertSequenced)
}

// insertWith runs in, which inserts params in a transaction with the insert
// it is given: in the caller's transaction tx, under a savepoint, or, when
// tx is nil, in a transaction of its own.
func (o *Ops[Q]) insertWith(ctx context.Context, tx driver.Tx, params []driver.InsertParams,
	in func(ctx context.Context, q Q, params []driver.InsertParams, insert insertFunc[Q]) ([]driver.InsertResult, func(), error),
) ([]driver.InsertResult, error) {
	if tx != nil {
		q, err := o.c.CallerTx(tx)
		if err != nil {
			return nil, err
		}
		return InsertSavepointed(ctx, o.c.DB.Conn(q), func() ([]driver.InsertResult, error) {
			out, _, err := in(ctx, q, params, func(ctx context.Context, q Q, p []driver.InsertParams) ([]driver.InsertResult, func(), error) {
				out, err := o.c.InsertCaller(ctx, q, p)
				return out, nil, err
			})
			return out, err
		})
	}
	var (
		out   []driver.InsertResult
		after func()
	)
	err := o.c.DB.Commit(ctx, func(q Q) error {
		var err error
		out, after, err = in(ctx, q, params, o.c.InsertIn)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	if after != nil {
		after()
	}
	return out, nil
}

// insertFunc inserts tasks in the transaction q.
type insertFunc[Q any] func(ctx context.Context, q Q, params []driver.InsertParams) ([]driver.InsertResult, func(), error)

// insertIn inserts params in the transaction q: through the sequences when
// any has a key.
func (o *Ops[Q]) insertIn(ctx context.Context, q Q, params []driver.InsertParams) ([]driver.InsertResult, func(), error) {
	if Sequenced(params) {
		return o.insertSequenced(ctx, q, params, o.c.InsertIn)
	}
	return o.c.InsertIn(ctx, q, params)
}

// insertSequenced inserts params with insert in the transaction q. Each
// key's row is taken first, in key order: enqueues of a key, and its
// releases, happen one after another. The first member inserted of a key
// that had no member left keeps its run time; every other is held. Every
// member joins its key's list.
func (o *Ops[Q]) insertSequenced(ctx context.Context, q Q, params []driver.InsertParams, insert insertFunc[Q]) ([]driver.InsertResult, func(), error) {
	s, db, c := o.c.SQL.Sequences, o.c.DB, o.c.DB.Conn(q)
	skip := map[string]bool{}
	for _, p := range params {
		if p.Sequence != "" {
			skip[p.Sequence] = p.SkipDead // the key's latest enqueue says
		}
	}
	keys := make([]string, 0, len(skip))
	for k := range skip {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	empty := map[string]bool{}
	now := params[0].Now
	for _, k := range keys {
		if _, err := c.Exec(ctx, s.Upsert, k, skip[k], db.Time(now), db.Time(now)); err != nil {
			return nil, nil, fmt.Errorf("sequence %q: %w", k, err)
		}
		n, err := oneID(c.Rows(ctx, s.Count, k))
		if err != nil {
			return nil, nil, fmt.Errorf("sequence %q: %w", k, err)
		}
		empty[k] = n == 0
	}
	out, after, err := insert(ctx, q, params)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range out {
		k := params[i].Sequence
		if k == "" || r.Duplicate {
			continue
		}
		// The insert wrote the run time asked for, as the database's clock
		// reckons it (PostgreSQL and MySQL take it as an offset from their
		// now); a member behind another is held at the exact mark instead.
		runAt := r.Task.RunAt
		if !empty[k] {
			runAt = driver.HeldUntil
		}
		empty[k] = false
		if _, err := c.Exec(ctx, s.SetKey, k, db.Time(runAt), r.Task.ID); err != nil {
			return nil, nil, fmt.Errorf("sequence %q: %w", k, err)
		}
		if _, err := c.Exec(ctx, s.AddMember, k, r.Task.ID); err != nil {
			return nil, nil, fmt.Errorf("sequence %q: %w", k, err)
		}
		if runAt.Equal(driver.HeldUntil) {
			if err := o.countMove(ctx, q, StateOf(r.Task), runAt); err != nil {
				return nil, nil, err
			}
		}
		r.Task.Sequence, r.Task.RunAt = k, runAt
	}
	return out, after, nil
}

// countMove counts, in the live counters of a driver that counts in Go,
// the move of the pending task from to run at runAt: held, or released.
func (o *Ops[Q]) countMove(ctx context.Context, q Q, from RowState, runAt time.Time) error {
	if o.c.Count == nil {
		return nil
	}
	to := from
	to.RunAt = runAt
	var t Tally
	t.Update(from, to, runAt, false)
	return o.c.Count(ctx, q, &t)
}

// notify tells the workers of other processes that queues have ready tasks,
// when the driver can.
func (o *Ops[Q]) notify(ctx context.Context, q Q, queues []string) error {
	if o.c.Notify == nil || len(queues) == 0 {
		return nil
	}
	return o.c.Notify(ctx, q, queues)
}

// SettleFinished settles, in the transaction q that applied them, the keys
// of the sequence members among ts whose transition applied (the ids in
// applied): a member that succeeded, or died under skip_dead,
// leaves its key and the next member is released; the queues of the
// members released are told on commit (OpsConfig.Notify).
func (o *Ops[Q]) SettleFinished(ctx context.Context, q Q, now time.Time, ts []driver.Transition, applied []int64) error {
	var keys []string
	for _, t := range ts {
		if SequencedTask(t) && t.State != driver.StatePending && slices.Contains(applied, t.ID) {
			keys = append(keys, t.Task.Sequence)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var queues []string
	for _, k := range keys {
		queue, err := o.settleKey(ctx, q, k, now)
		if err != nil {
			return err
		}
		if queue != "" && !slices.Contains(queues, queue) {
			queues = append(queues, queue)
		}
	}
	return o.notify(ctx, q, queues)
}

// headChunk is how many of a key's first members settleKey reads at once.
const headChunk = 50

// settleKey locks key and walks its members from the first: members that
// finished, or left the task table, leave the list; the first one left
// is released if it is held. A dead first member holds the key unless
// skip_dead is set. It returns the released member's queue ("" for none).
func (o *Ops[Q]) settleKey(ctx context.Context, q Q, key string, now time.Time) (string, error) {
	s, db, c := o.c.SQL.Sequences, o.c.DB, o.c.DB.Conn(q)
	skips, err := Collect(c.Rows(ctx, s.Lock, key), func(scan Scan) (*bool, error) {
		var b bool
		return &b, scan(&b)
	})
	if err != nil {
		return "", fmt.Errorf("sequence %q: %w", key, err)
	}
	skip := len(skips) > 0 && skips[0]
	type member struct {
		id                int64
		state, queue, typ *string
		priority, attempt *int
		held              int
	}
	for {
		heads, err := Collect(c.Rows(ctx, s.Head, db.Time(driver.HeldUntil), key, headChunk), func(scan Scan) (*member, error) {
			var m member
			return &m, scan(&m.id, &m.state, &m.queue, &m.typ, &m.priority, &m.attempt, &m.held)
		})
		if err != nil {
			return "", fmt.Errorf("sequence %q: %w", key, err)
		}
		for _, m := range heads {
			state := driver.State("")
			if m.state != nil {
				state = driver.State(*m.state)
			}
			switch {
			case state == "", state == driver.StateSucceeded, state == driver.StateCancelled,
				state == driver.StateDead && skip:
				if _, err := c.Exec(ctx, s.DropMember, key, m.id); err != nil {
					return "", fmt.Errorf("sequence %q: %w", key, err)
				}
				continue
			case state == driver.StatePending && m.held == 1:
				if now, err = o.txNow(ctx, q, now); err != nil {
					return "", fmt.Errorf("sequence %q: %w", key, err)
				}
				now = now.UTC().Truncate(time.Microsecond)
				n, err := c.Exec(ctx, s.Release, db.Time(now), db.Time(now), m.id, db.Time(driver.HeldUntil))
				if err != nil {
					return "", fmt.Errorf("sequence %q: release task %d: %w", key, m.id, err)
				}
				if n == 1 {
					held := RowState{Queue: *m.queue, Type: *m.typ, State: driver.StatePending, Attempt: *m.attempt,
						Priority: *m.priority, RunAt: driver.HeldUntil}
					return *m.queue, o.countMove(ctx, q, held, now)
				}
			}
			return "", nil // running, ready, retrying or holding the key dead
		}
		if len(heads) < headChunk {
			return "", nil
		}
	}
}

// SettleSequences implements driver.Sequencer: each key in its own
// transaction.
func (o *Ops[Q]) SettleSequences(ctx context.Context, now time.Time, limit int) (int, error) {
	s, db := o.c.SQL.Sequences, o.c.DB
	keys, err := Collect(db.pool().Rows(ctx, s.Candidates, db.Time(driver.HeldUntil), limit), func(scan Scan) (*string, error) {
		var k string
		return &k, scan(&k)
	})
	if err != nil {
		return 0, fmt.Errorf("settle sequences: %w", err)
	}
	released := 0
	for _, k := range keys {
		var queue string
		err := db.Commit(ctx, func(q Q) error {
			var err error
			if queue, err = o.settleKey(ctx, q, k, now); err != nil || queue == "" {
				return err
			}
			return o.notify(ctx, q, []string{queue})
		})
		if err != nil {
			return released, fmt.Errorf("settle sequences: %w", err)
		}
		if queue != "" {
			released++
		}
	}
	return released, nil
}

// PruneSequences implements driver.Sequencer.
func (o *Ops[Q]) PruneSequences(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := o.c.DB.Do(ctx, func(q Q) error {
		var err error
		n, err = o.c.DB.Conn(q).Exec(ctx, o.c.SQL.Sequences.Prune, o.c.DB.Time(before))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune sequences: %w", err)
	}
	return n, nil
}

// BlockedSequences implements driver.Sequencer.
func (o *Ops[Q]) BlockedSequences(ctx context.Context, after string, limit int) ([]driver.BlockedSequence, error) {
	s := o.c.SQL.Sequences
	out, err := Collect(o.c.DB.pool().Rows(ctx, s.Blocked, after, limit), s.ScanBlocked)
	if err != nil {
		return nil, fmt.Errorf("blocked sequences: %w", err)
	}
	return out, nil
}

// SequenceDialect is what SequenceStatements needs of a driver's SQL.
type SequenceDialect struct {
	// Prefix goes before each table name ("{schema}." on PostgreSQL).
	Prefix string
	// Mark is the placeholder of the nth argument (from 1).
	Mark func(n int) string
	// Upsert is the statement of SequenceSQL.Upsert.
	Upsert string
	// ForUpdate ends a read that locks its rows (empty on SQLite, whose
	// single writer serializes every write); CurrentRead one that must
	// read what is committed now.
	ForUpdate, CurrentRead string
	// ScanBlocked reads a row of Blocked.
	ScanBlocked func(Scan) (*driver.BlockedSequence, error)
	// ByID follows keel_tasks in the statements that update a task by id
	// (" FORCE INDEX (PRIMARY)" on MySQL: see its queries.go).
	ByID string
}

// SequenceStatements are the sequence statements in d's dialect.
func SequenceStatements(d SequenceDialect) SequenceSQL {
	m, p := d.Mark, d.Prefix
	first := `m.task_id = (SELECT min(f.task_id) FROM ` + p + `keel_sequence_members f WHERE f.seq_key = m.seq_key)`
	return SequenceSQL{
		Upsert:     d.Upsert,
		Lock:       `SELECT skip_dead FROM ` + p + `keel_sequences WHERE seq_key = ` + m(1) + d.ForUpdate,
		Count:      `SELECT count(*) FROM ` + p + `keel_sequence_members WHERE seq_key = ` + m(1) + d.CurrentRead,
		AddMember:  `INSERT INTO ` + p + `keel_sequence_members (seq_key, task_id) VALUES (` + m(1) + `, ` + m(2) + `)`,
		DropMember: `DELETE FROM ` + p + `keel_sequence_members WHERE seq_key = ` + m(1) + ` AND task_id = ` + m(2),
		SetKey:     `UPDATE ` + p + `keel_tasks` + d.ByID + ` SET seq_key = ` + m(1) + `, run_at = ` + m(2) + ` WHERE id = ` + m(3),
		Head: `SELECT m.task_id, t.state, t.queue, t.type, t.priority, t.attempt, CASE WHEN t.run_at = ` + m(1) + ` THEN 1 ELSE 0 END
FROM ` + p + `keel_sequence_members m LEFT JOIN ` + p + `keel_tasks t ON t.id = m.task_id
WHERE m.seq_key = ` + m(2) + ` ORDER BY m.task_id LIMIT ` + m(3),
		Release: `UPDATE ` + p + `keel_tasks` + d.ByID + ` SET run_at = ` + m(1) + `, updated_at = ` + m(2) + `
WHERE id = ` + m(3) + ` AND state = 'pending' AND run_at = ` + m(4),
		Candidates: `SELECT m.seq_key FROM ` + p + `keel_sequence_members m
LEFT JOIN ` + p + `keel_tasks t ON t.id = m.task_id
JOIN ` + p + `keel_sequences s ON s.seq_key = m.seq_key
WHERE ` + first + `
	AND (t.id IS NULL OR t.state IN ('succeeded', 'cancelled') OR (t.state = 'dead' AND s.skip_dead)
		OR (t.state = 'pending' AND t.run_at = ` + m(1) + `))
LIMIT ` + m(2),
		Prune: `DELETE FROM ` + p + `keel_sequences WHERE updated_at < ` + m(1) + `
	AND NOT EXISTS (SELECT 1 FROM ` + p + `keel_sequence_members m WHERE m.seq_key = ` + p + `keel_sequences.seq_key)`,
		Blocked: `SELECT m.seq_key, m.task_id, t.finished_at,
	(SELECT count(*) FROM ` + p + `keel_sequence_members w WHERE w.seq_key = m.seq_key) - 1
FROM ` + p + `keel_sequence_members m
JOIN ` + p + `keel_tasks t ON t.id = m.task_id
JOIN ` + p + `keel_sequences s ON s.seq_key = m.seq_key
WHERE ` + first + ` AND t.state = 'dead' AND NOT s.skip_dead AND m.seq_key > ` + m(1) + `
ORDER BY m.seq_key LIMIT ` + m(2),
		ScanBlocked: d.ScanBlocked,
	}
}

// ScanBlocked reads a row of SequenceSQL.Blocked; T is how the database
// hands over a timestamp that may be NULL, opt turns it into a UTC time.
func ScanBlocked[T any](scan Scan, opt func(T) time.Time) (*driver.BlockedSequence, error) {
	var (
		b  driver.BlockedSequence
		at T
	)
	if err := scan(&b.Key, &b.DeadID, &at, &b.Waiting); err != nil {
		return nil, err
	}
	b.Since = opt(at)
	return &b, nil
}
