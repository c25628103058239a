package sqlutil

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// Tally is what one write changes in the live counters (keel_counts) and
// the history (keel_minutes), for drivers that count in Go (SQLite,
// MySQL). It counts exactly what PostgreSQL's triggers count (see
// driver.CountRow and driver.MinuteRow); the driver writes it in the same
// transaction as the change. The zero value is empty and ready to use.
type Tally struct {
	counts  map[countKey]int64
	minutes map[minuteKey]*driver.MinuteRow
}

type countKey struct {
	queue, typ, kind string
	priority         int
	due              int64
}

type minuteKey struct {
	minute     int64
	queue, typ string
}

// RowState is what the counters read of a task row before or after a
// write.
type RowState struct {
	Queue       string
	Type        string
	State       driver.State
	Attempt     int
	Priority    int
	RunAt       time.Time
	AttemptedAt time.Time
}

// StateOf is the counted part of r.
func StateOf(r *driver.TaskRow) RowState {
	return RowState{Queue: r.Queue, Type: r.Type, State: r.State, Attempt: r.Attempt, Priority: r.Priority,
		RunAt: r.RunAt, AttemptedAt: r.AttemptedAt}
}

func (r RowState) key() countKey {
	k := countKey{queue: r.Queue, typ: r.Type, kind: driver.CountKind(r.State, r.Attempt)}
	if r.State == driver.StatePending {
		k.priority, k.due = r.Priority, driver.DueMinute(r.RunAt)
	}
	return k
}

func (t *Tally) add(k countKey, n int64) {
	if t.counts == nil {
		t.counts = map[countKey]int64{}
	}
	t.counts[k] += n
}

func (t *Tally) minute(queue, typ string, now time.Time) *driver.MinuteRow {
	return t.minuteAt(driver.DueMinute(now), queue, typ)
}

func (t *Tally) minuteAt(minute int64, queue, typ string) *driver.MinuteRow {
	if t.minutes == nil {
		t.minutes = map[minuteKey]*driver.MinuteRow{}
	}
	k := minuteKey{minute, queue, typ}
	m := t.minutes[k]
	if m == nil {
		m = &driver.MinuteRow{Minute: k.minute, Queue: queue, Type: typ}
		t.minutes[k] = m
	}
	return m
}

// Merge adds o's changes to t.
func (t *Tally) Merge(o *Tally) {
	for k, n := range o.counts {
		t.add(k, n)
	}
	for k, m := range o.minutes {
		t.minuteAt(k.minute, k.queue, k.typ).Add(*m)
	}
}

// Insert counts a new row n written at now.
func (t *Tally) Insert(n RowState, now time.Time) {
	t.add(n.key(), 1)
	t.minute(n.Queue, n.Type, now).Enqueued++
}

// Hit counts an insert that returned the task holding its key.
func (t *Tally) Hit(queue, typ string, now time.Time) {
	t.minute(queue, typ, now).Hits++
}

// Delete counts a deleted row o.
func (t *Tally) Delete(o RowState) {
	t.add(o.key(), -1)
}

// Update counts the change of one row from o to n by a write at now;
// errored reports that the write appended an attempt error.
func (t *Tally) Update(o, n RowState, now time.Time, errored bool) {
	t.update(o, n, now, now, errored)
}

// update is Update for an attempt that ended at endedAt (at most now): its
// run time counts to ended.
func (t *Tally) update(o, n RowState, now, endedAt time.Time, errored bool) {
	if ko, kn := o.key(), n.key(); ko != kn {
		t.add(ko, -1)
		t.add(kn, 1)
	}
	claimed := o.State == driver.StatePending && n.State == driver.StateRunning
	ended := o.State == driver.StateRunning && n.State != driver.StateRunning && n.Attempt == o.Attempt
	into := func(s driver.State) int64 {
		if n.State == s && o.State != s {
			return 1
		}
		return 0
	}
	succeeded, dead, cancelled := into(driver.StateSucceeded), into(driver.StateDead), into(driver.StateCancelled)
	if !claimed && !ended && succeeded+dead+cancelled == 0 {
		return
	}
	m := t.minute(n.Queue, n.Type, now)
	m.Succeeded += succeeded
	m.Dead += dead
	m.Cancelled += cancelled
	if claimed {
		m.Attempts++
	}
	if ended {
		m.Ended++
		if errored {
			m.Failed++
		}
		m.DurationMS += endedAt.Sub(o.AttemptedAt).Microseconds() / 1000
		ms := endedAt.UnixMilli()
		if m.FirstMS == 0 || ms < m.FirstMS {
			m.FirstMS = ms
		}
		m.LastMS = max(m.LastMS, ms)
	}
}

// Finished counts transition tr applied to task (as claimed: running) at
// now.
func (t *Tally) Finished(task *driver.TaskRow, tr driver.Transition, now time.Time) {
	o := StateOf(task)
	o.State = driver.StateRunning
	n := o
	n.State = tr.State
	if tr.Refund {
		n.Attempt--
	}
	if !tr.RunAt.IsZero() {
		n.RunAt = tr.RunAt
	}
	ended := now
	if !tr.Ended.IsZero() && tr.Ended.Before(now) && !tr.Ended.Before(task.AttemptedAt) {
		ended = tr.Ended
	}
	t.update(o, n, now, ended, tr.Error != nil)
}

// Ends collects the end times (Transition.Ended) of plain successes, by
// id, for Finished: see SplitFinish.
type Ends map[int64]time.Time

// Add records t's end time, when it has one.
func (e Ends) Add(t driver.Transition) {
	if !t.Ended.IsZero() {
		e[t.ID] = t.Ended
	}
}

// Success is the plain success of task id, as Finished counts it.
func (e Ends) Success(id int64) driver.Transition {
	return driver.Transition{ID: id, State: driver.StateSucceeded, Ended: e[id]}
}

// Counts returns the counter changes, without zeros, in key order (the
// order in which every writer locks counter rows, so that two writers
// never wait for each other in a cycle).
func (t *Tally) Counts() []driver.CountRow {
	out := make([]driver.CountRow, 0, len(t.counts))
	for k, n := range t.counts {
		if n != 0 {
			out = append(out, driver.CountRow{Queue: k.queue, Type: k.typ, Kind: k.kind, Priority: k.priority, Due: k.due, N: n})
		}
	}
	slices.SortFunc(out, func(a, b driver.CountRow) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Due, b.Due))
	})
	return out
}

// Minutes returns the history changes in key order.
func (t *Tally) Minutes() []driver.MinuteRow {
	out := make([]driver.MinuteRow, 0, len(t.minutes))
	for _, m := range t.minutes {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b driver.MinuteRow) int {
		return cmp.Or(cmp.Compare(a.Minute, b.Minute), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Type, b.Type))
	})
	return out
}

// Statement is one SQL statement and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Statements are the upserts that write t: countSQL and minuteSQL with
// {rows} replaced by as many countRow and minuteRow groups as there are
// counter and history rows (arguments as CountArgs and MinuteArgs), each
// left out when it has no rows.
func (t *Tally) Statements(countSQL, countRow, minuteSQL, minuteRow string) []Statement {
	var out []Statement
	if rows := t.Counts(); len(rows) > 0 {
		out = append(out, Statement{strings.Replace(countSQL, "{rows}", Repeat(countRow, len(rows)), 1), CountArgs(rows)})
	}
	if rows := t.Minutes(); len(rows) > 0 {
		out = append(out, Statement{strings.Replace(minuteSQL, "{rows}", Repeat(minuteRow, len(rows)), 1), MinuteArgs(rows)})
	}
	return out
}

// CountDiff is what must be added to the counters kept to make them equal
// the counts of the task table (truth), both as of one snapshot.
func CountDiff(truth, kept []driver.CountRow) []driver.CountRow {
	var t Tally
	for _, r := range truth {
		t.add(countKey{r.Queue, r.Type, r.Kind, r.Priority, r.Due}, r.N)
	}
	for _, r := range kept {
		t.add(countKey{r.Queue, r.Type, r.Kind, r.Priority, r.Due}, -r.N)
	}
	return t.Counts()
}

// CountArgs flattens rows to the arguments of a multi-row counter upsert:
// queue, type, kind, priority, due, n for each.
func CountArgs(rows []driver.CountRow) []any {
	args := make([]any, 0, 6*len(rows))
	for _, r := range rows {
		args = append(args, r.Queue, r.Type, r.Kind, r.Priority, r.Due, r.N)
	}
	return args
}

// MinuteArgs flattens rows to the arguments of a multi-row history upsert:
// minute, queue, type, then the counted columns in MinuteRow's order.
func MinuteArgs(rows []driver.MinuteRow) []any {
	args := make([]any, 0, 14*len(rows))
	for _, m := range rows {
		args = append(args, m.Minute, m.Queue, m.Type, m.Enqueued, m.Hits, m.Attempts, m.Ended, m.Failed,
			m.Succeeded, m.Dead, m.Cancelled, m.DurationMS, m.FirstMS, m.LastMS)
	}
	return args
}

// ScanCountRow reads one row of queue, type, kind, priority, due, n.
func ScanCountRow(scan Scan) (*driver.CountRow, error) {
	var c driver.CountRow
	if err := scan(&c.Queue, &c.Type, &c.Kind, &c.Priority, &c.Due, &c.N); err != nil {
		return nil, err
	}
	return &c, nil
}

// ScanMinuteRow reads one history row in MinuteRow's column order.
func ScanMinuteRow(scan Scan) (*driver.MinuteRow, error) {
	var m driver.MinuteRow
	if err := scan(&m.Minute, &m.Queue, &m.Type, &m.Enqueued, &m.Hits, &m.Attempts, &m.Ended, &m.Failed,
		&m.Succeeded, &m.Dead, &m.Cancelled, &m.DurationMS, &m.FirstMS, &m.LastMS); err != nil {
		return nil, err
	}
	return &m, nil
}

// Repeat is n copies of group joined by ", ": the VALUES list of a
// multi-row statement.
func Repeat(group string, n int) string {
	s := strings.Repeat(group+", ", n)
	return s[:len(s)-2]
}

// WorkersJSON encodes a node's workers per queue for keel_nodes.workers.
func WorkersJSON(w map[string]int) (string, error) {
	if w == nil {
		return "{}", nil
	}
	b, err := json.Marshal(w)
	return string(b), err
}

// MergeMinutes sums history rows by minute, queue and type, in key order:
// counts add up, FirstMS is the least that is not 0, LastMS the greatest.
func MergeMinutes(rows []driver.MinuteRow) []driver.MinuteRow {
	var t Tally
	for _, r := range rows {
		t.minuteAt(r.Minute, r.Queue, r.Type).Add(r)
	}
	return t.Minutes()
}

// DescribedTasks returns, by id, the tasks the transitions ts describe
// (Transition.Task), and the ids of those that describe none: the driver
// reads those before counting them.
func DescribedTasks(ts []driver.Transition) (known map[int64]*driver.TaskRow, missing []int64) {
	known = make(map[int64]*driver.TaskRow, len(ts))
	for _, t := range ts {
		if t.Task != nil {
			known[t.ID] = t.Task
		} else {
			missing = append(missing, t.ID)
		}
	}
	return known, missing
}

// CounterSQL are a driver's reads of the live counters: Counts selects the
// counter rows (ScanCountRow), Minutes (minute) the history from a minute
// on (ScanMinuteRow).
type CounterSQL struct{ Counts, Minutes string }

// Counts implements driver.Driver.
func (o *Ops[Q]) Counts(ctx context.Context) ([]driver.CountRow, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Counters.Counts), ScanCountRow)
	if err != nil {
		return nil, fmt.Errorf("read live counters: %w", err)
	}
	return out, nil
}

// Minutes implements driver.Driver.
func (o *Ops[Q]) Minutes(ctx context.Context, since time.Time) ([]driver.MinuteRow, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Counters.Minutes, driver.DueMinute(since)), ScanMinuteRow)
	if err != nil {
		return nil, fmt.Errorf("read task history: %w", err)
	}
	return out, nil
}

// UpsertCountRows adds rows to the live counters on c with upsert, a
// statement whose {rows} takes row once for each (nothing when there are
// none).
func UpsertCountRows(ctx context.Context, c Conn, upsert, row string, rows []driver.CountRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := c.Exec(ctx, strings.Replace(upsert, "{rows}", Repeat(row, len(rows)), 1), CountArgs(rows)...)
	return err
}

// DropMinutes drops the history before p.MinutesBefore on c with drop
// (minute), unless that is zero.
func DropMinutes(ctx context.Context, c Conn, drop string, p driver.ReconcileParams) error {
	if p.MinutesBefore.IsZero() {
		return nil
	}
	_, err := c.Exec(ctx, drop, driver.DueMinute(p.MinutesBefore))
	return err
}
