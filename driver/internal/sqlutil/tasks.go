package sqlutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// MissingOrWrongState is the error for task id when a conditional update
// changed nothing: getErr is what looking the task up returned (ErrNotFound
// when it does not exist); a task that exists was in the wrong state.
func MissingOrWrongState(id int64, getErr error) error {
	if getErr != nil {
		return getErr
	}
	return fmt.Errorf("task %d: %w", id, driver.ErrWrongState)
}

// KeyHolder is the result of an insert whose idempotency key another task
// holds: holder (nil when it released the key in the meantime) is returned
// as a duplicate when its payload is the same, else it is a conflict.
func KeyHolder(holder *driver.TaskRow, p driver.InsertParams) (driver.InsertResult, error) {
	if holder == nil {
		// The holder finished and released the key between the two
		// statements; the caller may retry.
		return driver.InsertResult{}, errors.New("insert task: idempotency key holder vanished, try again")
	}
	if holder.PayloadDigest != p.PayloadDigest {
		return driver.InsertResult{}, fmt.Errorf("insert task: key held by task %d: %w", holder.ID, driver.ErrIdempotencyConflict)
	}
	return driver.InsertResult{Task: holder, Duplicate: true}, nil
}

// InsertSavepoint runs insert under a savepoint of the caller's
// transaction, so a failure leaves nothing of the batch in it. exec runs
// one statement in that transaction.
func InsertSavepoint(ctx context.Context, exec func(ctx context.Context, sql string) error, insert func() error) error {
	if err := exec(ctx, `SAVEPOINT keel_insert`); err != nil {
		return fmt.Errorf("insert tasks: %w", err)
	}
	if err := insert(); err != nil {
		undo := context.WithoutCancel(ctx)
		if rbErr := exec(undo, `ROLLBACK TO SAVEPOINT keel_insert`); rbErr != nil {
			return errors.Join(err, fmt.Errorf("insert tasks: undo: %w", rbErr))
		}
		exec(undo, `RELEASE SAVEPOINT keel_insert`) //nolint:errcheck // the savepoint is empty now
		return err
	}
	if err := exec(ctx, `RELEASE SAVEPOINT keel_insert`); err != nil {
		return fmt.Errorf("insert tasks: %w", err)
	}
	return nil
}

// ListQuery appends List's filter, order and limit to base (a SELECT of
// the task columns) and returns the query and its arguments. mark returns
// the dialect's placeholder for the nth argument (from 1); at turns a time
// into the argument the database compares with its timestamps.
func ListQuery(base string, p driver.Filter, mark func(n int) string, at func(time.Time) any) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+mark(len(args)))
	}
	if p.State != "" {
		add("state = ", string(p.State))
		// What the state implies, written as the partial indexes say it,
		// so that a planner can prove their predicate from the query text:
		// SQLite cannot from a bound parameter, and the running tasks'
		// index on PostgreSQL names only their lease (every running task
		// has one).
		switch p.State {
		case driver.StateDead, driver.StateCancelled:
			where = append(where, "state IN ('dead', 'cancelled')")
		case driver.StateRunning:
			where = append(where, "state = 'running'", "lease_expires_at IS NOT NULL")
		}
	}
	if p.Type != "" {
		add("type = ", p.Type)
	}
	if p.Queue != "" {
		add("queue = ", p.Queue)
	}
	for _, l := range []struct {
		col   string
		names []string
		not   bool
	}{{"type", p.Types, false}, {"type", p.ExcludeTypes, true}, {"queue", p.ExcludeQueues, true}} {
		if len(l.names) == 0 {
			continue
		}
		// Prefixes ("keel.*") compare the name's start, which every
		// database reads alike (LIKE folds case on SQLite); the names are
		// ASCII, so a length in characters is one in bytes.
		var parts, exact []string
		for _, n := range l.names {
			if prefix, ok := strings.CutSuffix(n, "*"); ok {
				args = append(args, prefix)
				parts = append(parts, fmt.Sprintf("substr(%s, 1, %d) = %s", l.col, len(prefix), mark(len(args))))
			}
		}
		for _, n := range l.names {
			if !strings.HasSuffix(n, "*") {
				args = append(args, n)
				exact = append(exact, mark(len(args)))
			}
		}
		if len(exact) > 0 {
			parts = append(parts, l.col+" IN ("+strings.Join(exact, ", ")+")")
		}
		cond := "(" + strings.Join(parts, " OR ") + ")"
		if l.not {
			cond = "NOT " + cond
		}
		where = append(where, cond)
	}
	if !p.CreatedAfter.IsZero() {
		add("created_at >= ", at(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		add("created_at < ", at(p.CreatedBefore))
	}
	if !p.FinishedAfter.IsZero() {
		add("finished_at >= ", at(p.FinishedAfter))
	}
	if !p.FinishedBefore.IsZero() {
		add("finished_at < ", at(p.FinishedBefore))
	}
	if p.BeforeID > 0 {
		add("id < ", p.BeforeID)
	}
	if p.AfterID > 0 {
		add("id > ", p.AfterID)
	}
	q := base
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	return q + " ORDER BY id DESC LIMIT " + mark(len(args)), args
}

// Question is the placeholder of databases whose placeholders are "?".
func Question(int) string { return "?" }

// MatchArgs are the arguments of a bulk operation's selection, in the
// order of the drivers' matchWhere: the state, then type, queue, finished
// from and finished before (NULL when not set), each repeated times (a
// dialect without numbered placeholders names each twice), then the limit.
// at turns a time into an argument.
func MatchArgs(p driver.Filter, at func(time.Time) any, repeat int) []any {
	out := make([]any, 0, 2+4*repeat)
	out = append(out, string(p.State))
	for _, v := range []any{NullString(p.Type), NullString(p.Queue), at(p.FinishedAfter), at(p.FinishedBefore)} {
		for range repeat {
			out = append(out, v)
		}
	}
	return append(out, p.Limit)
}

// PlainSuccess reports whether t is a success with nothing to store (no
// result, error or refund): those are finished together, in one statement.
func PlainSuccess(t driver.Transition) bool {
	return t.State == driver.StateSucceeded && t.Error == nil && !t.Refund && t.Result == nil && !SequencedTask(t)
}

// TransitionArgs are the arguments of t that every driver's transition
// statement takes in the same form: the attempt error as JSON text (NULL
// when none) and the refund as 0 or 1.
func TransitionArgs(t driver.Transition) (errJSON any, refund int, err error) {
	if t.Error != nil {
		b, err := json.Marshal(t.Error)
		if err != nil {
			return nil, 0, fmt.Errorf("finish task %d: %w", t.ID, err)
		}
		errJSON = string(b)
	}
	if t.Refund {
		refund = 1
	}
	return errJSON, refund, nil
}

// ClaimTypes are the type filters of a claim: the types to take (nil:
// any) less those excluded, and the types to exclude when any type is
// taken. A claim never filters both ways: one list keeps the claim on its
// index (PostgreSQL's generic plan for both filters read the whole table
// and sorted it once the table had statistics). claim is false when no
// type is left to take.
func ClaimTypes(p driver.ClaimParams) (include, exclude []string, claim bool) {
	if p.Types == nil {
		return nil, p.ExcludeTypes, true
	}
	include = make([]string, 0, len(p.Types))
	for _, t := range p.Types {
		if !slices.Contains(p.ExcludeTypes, t) {
			include = append(include, t)
		}
	}
	return include, nil, len(include) > 0
}

// SnoozeArg is the snooze increment of t for every driver's transition
// statement: 1 when t counts as a snooze, else 0.
func SnoozeArg(t driver.Transition) int {
	if t.Snooze {
		return 1
	}
	return 0
}

// InsertOrder is the order in which a driver inserts params: tasks without
// an idempotency key first, as given, then the others by key. Two batches
// that share keys then take the keys' index entries in the same order and
// cannot deadlock on them; of equal keys the first given goes first.
// Drivers return results in the caller's order all the same.
func InsertOrder(params []driver.InsertParams) []int {
	order := make([]int, 0, len(params))
	for i, p := range params {
		if p.IdemKey == "" {
			order = append(order, i)
		}
	}
	plain := len(order)
	for i, p := range params {
		if p.IdemKey != "" {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order[plain:], func(a, b int) int { return strings.Compare(params[a].IdemKey, params[b].IdemKey) })
	return order
}

// CancelledAttempt is the history entry, as JSON text, of the attempt a
// cancel ends: old is the task before the cancel, now the cancel's time
// (to the microsecond, as stored). NULL (nil) unless old is running:
// nothing ran.
func CancelledAttempt(old *driver.TaskRow, now time.Time) (any, error) {
	if old == nil || old.State != driver.StateRunning {
		return nil, nil
	}
	b, err := json.Marshal(driver.AttemptError{Attempt: old.Attempt, Node: old.LeaseOwner, Start: old.AttemptedAt.UTC(),
		End: now.UTC().Truncate(time.Microsecond), Outcome: driver.OutcomeCancelled, Error: driver.CancelledWhileRunning})
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// TaskSQL are a driver's task statements beside the hot path: ByKey
// (key) selects the task holding an idempotency key for Scan, ListQuery
// is List's query and arguments, Resign (name, owner) gives up a
// leadership, Step stores a step with StepArgs.
type TaskSQL struct {
	ByKey, Resign, Step string
	Scan                func(Scan) (*driver.TaskRow, error)
	ListQuery           func(p driver.Filter) (string, []any)
	StepArgs            func(p driver.StepParams) []any
}

// GetByKey implements driver.Driver.
func (o *Ops[Q]) GetByKey(ctx context.Context, key string) (*driver.TaskRow, error) {
	row, err := One(o.c.DB.Conn(o.c.DB.Lookup).Rows(ctx, o.c.SQL.Tasks.ByKey, key), o.c.SQL.Tasks.Scan)
	if err != nil {
		return nil, fmt.Errorf("get task by idempotency key: %w", err)
	}
	if row == nil {
		return nil, driver.ErrNotFound
	}
	return row, nil
}

// List implements driver.Driver.
func (o *Ops[Q]) List(ctx context.Context, p driver.Filter) ([]driver.TaskRow, error) {
	query, args := o.c.SQL.Tasks.ListQuery(p)
	out, err := Collect(o.c.DB.Conn(o.c.DB.Lookup).Rows(ctx, query, args...), o.c.SQL.Tasks.Scan)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// Resign implements driver.Driver.
func (o *Ops[Q]) Resign(ctx context.Context, name, owner string) error {
	if _, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Tasks.Resign, name, owner); err != nil {
		return fmt.Errorf("resign leadership: %w", err)
	}
	return nil
}

// SaveStep implements driver.Driver: one fenced update, which applies
// only while the caller holds the task's lease.
func (o *Ops[Q]) SaveStep(ctx context.Context, p driver.StepParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("save step: %w", err)
	}
	// Rows matched, on MySQL too (clientFoundRows).
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Tasks.Step, o.c.SQL.Tasks.StepArgs(p)...)
	if err != nil {
		return false, fmt.Errorf("save step %q of task %d: %w", p.Name, p.ID, err)
	}
	return n == 1, nil
}

// Changed is what Cancel or Retry (op) of task id returns when its
// conditional update returned row (nil: it matched nothing) and err
// (driver.ErrNotFound: no such task in keel_tasks): row, or why there is
// none, read back with get (see MissingOrWrongState: an archived task is
// in the wrong state).
func Changed(ctx context.Context, op string, id int64, row *driver.TaskRow, err error,
	get func(ctx context.Context, id int64) (*driver.TaskRow, error)) (*driver.TaskRow, error) {
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("%s task %d: %w", op, id, err)
	}
	if row == nil {
		_, err := get(ctx, id)
		return nil, MissingOrWrongState(id, err)
	}
	return row, nil
}

// KeyTaken is Retry's error for task id when a newer task holds its
// idempotency key.
func KeyTaken(id int64) error {
	return fmt.Errorf("retry task %d: a newer task holds its idempotency key: %w", id, driver.ErrIdempotencyConflict)
}

// RetryMatchingAttempts bounds how often RetryMatching runs again after a
// concurrent insert took an idempotency key the batch was requeueing.
const RetryMatchingAttempts = 3

// Bulk runs a bulk operation (op: "retry" or "purge") over the tasks p
// selects: it validates p and runs run, again (up to attempts in all)
// while again (nil: never) says its error calls for it. It returns how
// many tasks run changed.
func Bulk(op string, p driver.Filter, attempts int, again func(error) bool, run func() (int64, error)) (int64, error) {
	if err := p.ValidateBulk(); err != nil {
		return 0, fmt.Errorf("%s tasks: %w", op, err)
	}
	var n int64
	var err error
	for range max(attempts, 1) {
		if n, err = run(); err == nil || again == nil || !again(err) {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("%s tasks: %w", op, err)
	}
	return n, nil
}

// FindTask reads the one task row rows selects with scan:
// driver.ErrNotFound when there is none. An error of the read is named
// "<what> <id>" ("get task 7").
func FindTask(rows Rows, scan func(Scan) (*driver.TaskRow, error), what string, id int64) (*driver.TaskRow, error) {
	row, err := One(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s %d: %w", what, id, err)
	}
	if row == nil {
		return nil, driver.ErrNotFound
	}
	return row, nil
}
