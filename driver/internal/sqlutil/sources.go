package sqlutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// Broker sources' rejected messages (keel_rejected) and reports
// (keel_sources), see driver.SourceStore. The drivers keep their SQL; the
// column lists, the arguments, the row scans and the insert loop are here.

// RejectedColumns are the keel_rejected columns ScanRejected reads, in its
// order.
const RejectedColumns = `id, source, type, queue, key_spec, reason, body, size, headers, received_at, resubmitted_at, task_id`

// RejectedInsertColumns are the keel_rejected columns RejectedArgs
// writes, in its order.
const RejectedInsertColumns = `source, type, queue, key_spec, reason, body, size, headers, digest, received_at`

// SourceColumns are the keel_sources columns ReportArgs writes and
// ScanSource reads, in their order.
const SourceColumns = `source, node, kind, type, state, last_error, accepted, duplicate, rejected, nacked,
	ack_p50_us, ack_p99_us, started_at, updated_at`

// maxRejectedAttempts bounds how often InsertRejected tries one message
// whose stored duplicate vanished (deleted) between its insert and read.
const maxRejectedAttempts = 5

// RejectedSteps are one driver's statements for InsertRejected, run in
// its transaction: Insert stores p and returns the new row's id, or false
// when a row of p's source and digest is there already; Find returns the
// id of that row (false: there is none, it was deleted since).
type RejectedSteps struct {
	Insert func(p *driver.RejectedParams) (int64, bool, error)
	Find   func(source string, digest []byte) (int64, bool, error)
}

// ValidateRejected validates every message, naming the first bad one.
func ValidateRejected(params []driver.RejectedParams) error {
	for i := range params {
		if err := params[i].Validate(); err != nil {
			return fmt.Errorf("message %d of %d: %w", i+1, len(params), err)
		}
	}
	return nil
}

// InsertRejected stores each message with s, in the order given: a new
// row, or the existing row of its source and digest as a duplicate. The
// caller validated params (ValidateRejected) and runs it in one
// transaction, which it may run again: the results are built anew.
func InsertRejected(params []driver.RejectedParams, s RejectedSteps) ([]driver.RejectedResult, error) {
	out := make([]driver.RejectedResult, len(params))
	for i := range params {
		p := &params[i]
		r, err := insertOneRejected(p, s)
		if err != nil {
			return nil, fmt.Errorf("message %d of source %q: %w", i+1, p.Source, err)
		}
		out[i] = r
	}
	return out, nil
}

func insertOneRejected(p *driver.RejectedParams, s RejectedSteps) (driver.RejectedResult, error) {
	for range maxRejectedAttempts {
		id, ok, err := s.Insert(p)
		if err != nil {
			return driver.RejectedResult{}, err
		}
		if ok {
			return driver.RejectedResult{ID: id}, nil
		}
		if id, ok, err = s.Find(p.Source, p.Digest); err != nil {
			return driver.RejectedResult{}, err
		} else if ok {
			return driver.RejectedResult{ID: id, Duplicate: true}, nil
		}
	}
	return driver.RejectedResult{}, errors.New("its duplicate kept vanishing between insert and read")
}

// Execer is a database/sql handle that runs statements: *sql.DB, *sql.Tx,
// *sql.Conn or a driver's wrapper of one.
type Execer interface {
	Queryer
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// RejectedSQL are a database/sql driver's statements for
// InsertRejectedSQL. Insert takes RejectedArgs and either skips a row
// whose source and digest are stored (no row affected) or fails with an
// error Duplicate recognises (nil: it never does); Find takes source and
// digest and selects the stored row's id. At turns a time into the
// database's argument.
type RejectedSQL struct {
	Insert, Find string
	At           func(time.Time) any
	Duplicate    func(error) bool
}

// InsertRejectedSQL stores params with stmts on q (a transaction) for a
// database/sql driver; see InsertRejected.
func InsertRejectedSQL(ctx context.Context, q Execer, params []driver.RejectedParams, stmts RejectedSQL) ([]driver.RejectedResult, error) {
	return InsertRejected(params, RejectedSteps{
		Insert: func(p *driver.RejectedParams) (int64, bool, error) {
			res, err := q.ExecContext(ctx, stmts.Insert, RejectedArgs(p, stmts.At)...)
			if err != nil {
				if stmts.Duplicate != nil && stmts.Duplicate(err) {
					return 0, false, nil
				}
				return 0, false, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return 0, false, err
			}
			id, err := res.LastInsertId()
			return id, err == nil, err
		},
		Find: func(source string, digest []byte) (int64, bool, error) {
			ids, err := Collect(Query(ctx, q, stmts.Find, source, digest), func(scan Scan) (*int64, error) {
				var id int64
				return &id, scan(&id)
			})
			if err != nil || len(ids) == 0 {
				return 0, false, err
			}
			return ids[0], true, nil
		},
	})
}

// RejectedArgs are p's RejectedInsertColumns values: the body never NULL,
// empty headers "{}", the receive time through at.
func RejectedArgs(p *driver.RejectedParams, at func(time.Time) any) []any {
	body := p.Body
	if body == nil {
		body = []byte{}
	}
	headers := string(p.Headers)
	if headers == "" {
		headers = "{}"
	}
	return []any{p.Source, p.Type, p.Queue, p.Key, p.Reason, body, p.Size, headers, p.Digest, at(AlertTime(p.ReceivedAt))}
}

// RejectedFilterArgs are f's arguments for the drivers' list statement:
// source, open (1 or 0), before, limit.
func RejectedFilterArgs(f driver.RejectedFilter) []any {
	open := 0
	if f.Open {
		open = 1
	}
	return []any{f.Source, open, f.Before, f.Limit}
}

// ScanRejected reads one row selected with RejectedColumns. T is how the
// database hands over a timestamp and N one that may be NULL; at and opt
// turn them into UTC times (opt gives the zero time for NULL).
func ScanRejected[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.RejectedRow, error) {
	var (
		r           driver.RejectedRow
		headers     string
		received    T
		resubmitted N
		taskID      sql.NullInt64
	)
	err := scan(&r.ID, &r.Source, &r.Type, &r.Queue, &r.Key, &r.Reason, &r.Body, &r.Size, &headers,
		&received, &resubmitted, &taskID)
	if err != nil {
		return nil, err
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	r.Headers = []byte(headers)
	r.ReceivedAt, r.ResubmittedAt, r.TaskID = at(received), opt(resubmitted), taskID.Int64
	return &r, nil
}

// ValidateResolve rejects what ResolveRejected cannot record: a task id
// that is not positive, a time outside the years 1000..9999.
func ValidateResolve(taskID int64, now time.Time) error {
	if taskID <= 0 {
		return fmt.Errorf("task id must be positive, got %d", taskID)
	}
	if y := now.UTC().Year(); y < 1000 || y > 9999 {
		return fmt.Errorf("time %s outside the years 1000..9999", now.UTC().Format(time.RFC3339))
	}
	return nil
}

// ResolveRejected runs ResolveRejected's steps: update records the task
// where the message is open and returns the rows it changed; exists tells
// whether the message is there at all (asked only when update changed
// none).
func ResolveRejected(update func() (int64, error), exists func() (bool, error)) (bool, error) {
	n, err := update()
	if err != nil {
		return false, err
	}
	if n > 0 {
		return true, nil
	}
	ok, err := exists()
	if err != nil {
		return false, err
	}
	if !ok {
		return false, driver.ErrNotFound
	}
	return false, nil
}

// ReportArgs are r's SourceColumns values, its times through at (updated
// at r.Now), its durations in microseconds.
func ReportArgs(r driver.SourceReport, at func(time.Time) any) []any {
	return []any{r.Source, r.Node, r.Kind, r.Type, r.State, r.LastError, r.Accepted, r.Duplicate, r.Rejected, r.Nacked,
		r.AckP50.Microseconds(), r.AckP99.Microseconds(), at(AlertTime(r.StartedAt)), at(AlertTime(r.Now))}
}

// ScanSource reads one row selected with SourceColumns; at turns the
// database's timestamp into a UTC time.
func ScanSource[T any](scan Scan, at func(T) time.Time) (*driver.SourceRow, error) {
	var (
		r                driver.SourceRow
		p50, p99         int64
		started, updated T
	)
	err := scan(&r.Source, &r.Node, &r.Kind, &r.Type, &r.State, &r.LastError, &r.Accepted, &r.Duplicate, &r.Rejected,
		&r.Nacked, &p50, &p99, &started, &updated)
	if err != nil {
		return nil, err
	}
	r.AckP50, r.AckP99 = time.Duration(p50)*time.Microsecond, time.Duration(p99)*time.Microsecond
	r.StartedAt, r.UpdatedAt = at(started), at(updated)
	r.Now = r.UpdatedAt
	return &r, nil
}

// SourceSQL are a driver's keel_rejected and keel_sources statements, each
// taking its arguments in the order named: ListRejected (FilterArgs of the
// filter, RejectedFilterArgs when nil) and GetRejected (id) select
// RejectedColumns, Resolve (now, task id, id), Exists (id) selects a count
// (with ExistsBool a boolean), DeleteRejected (id), Report (ReportArgs),
// ListSources selects SourceColumns. InsertRejected stores messages in the
// transaction q (see InsertRejected).
type SourceSQL[Q any] struct {
	ListRejected, GetRejected, Resolve, Exists, DeleteRejected, Report, ListSources string
	ExistsBool                                                                      bool
	FilterArgs                                                                      func(f driver.RejectedFilter) []any
	InsertRejected                                                                  func(ctx context.Context, q Q, params []driver.RejectedParams) ([]driver.RejectedResult, error)
	ScanRejected                                                                    func(Scan) (*driver.RejectedRow, error)
	ScanSource                                                                      func(Scan) (*driver.SourceRow, error)
}

// InsertRejected implements driver.SourceStore.
func (o *Ops[Q]) InsertRejected(ctx context.Context, params []driver.RejectedParams) ([]driver.RejectedResult, error) {
	if err := ValidateRejected(params); err != nil {
		return nil, fmt.Errorf("insert rejected: %w", err)
	}
	var out []driver.RejectedResult
	err := o.c.DB.Commit(ctx, func(q Q) error {
		var err error
		out, err = o.c.SQL.Sources.InsertRejected(ctx, q, params)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert rejected: %w", err)
	}
	return out, nil
}

// ListRejected implements driver.SourceStore.
func (o *Ops[Q]) ListRejected(ctx context.Context, f driver.RejectedFilter) ([]driver.RejectedRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	s := o.c.SQL.Sources
	args := RejectedFilterArgs(f)
	if s.FilterArgs != nil {
		args = s.FilterArgs(f)
	}
	out, err := Collect(o.c.DB.pool().Rows(ctx, s.ListRejected, args...), s.ScanRejected)
	if err != nil {
		return nil, fmt.Errorf("list rejected: %w", err)
	}
	return out, nil
}

// GetRejected implements driver.SourceStore.
func (o *Ops[Q]) GetRejected(ctx context.Context, id int64) (*driver.RejectedRow, error) {
	row, err := One(o.c.DB.pool().Rows(ctx, o.c.SQL.Sources.GetRejected, id), o.c.SQL.Sources.ScanRejected)
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get rejected %d: %w", id, err)
	}
	return row, nil
}

// ResolveRejected implements driver.SourceStore. The update matches only
// an open message, so the rows it affected (or, on MySQL, matched:
// clientFoundRows) are the ones it changed.
func (o *Ops[Q]) ResolveRejected(ctx context.Context, id, taskID int64, now time.Time) (bool, error) {
	if err := ValidateResolve(taskID, now); err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	s := o.c.SQL.Sources
	applied, err := ResolveRejected(func() (int64, error) {
		return o.c.DB.exec(ctx, o.c.DB.Do, s.Resolve, o.c.DB.Time(AlertTime(now)), taskID, id)
	}, func() (bool, error) {
		if s.ExistsBool {
			return scanOne[bool](o.c.DB.pool().Rows(ctx, s.Exists, id))
		}
		n, err := scanOne[int](o.c.DB.pool().Rows(ctx, s.Exists, id))
		return n > 0, err
	})
	if err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	return applied, nil
}

// DeleteRejected implements driver.SourceStore.
func (o *Ops[Q]) DeleteRejected(ctx context.Context, id int64) error {
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Sources.DeleteRejected, id)
	if err == nil && n == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete rejected %d: %w", id, err)
	}
	return nil
}

// ReportSource implements driver.SourceStore.
func (o *Ops[Q]) ReportSource(ctx context.Context, r driver.SourceReport) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if _, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Sources.Report, ReportArgs(r, o.c.DB.Time)...); err != nil {
		return fmt.Errorf("report source %s on %s: %w", r.Source, r.Node, err)
	}
	return nil
}

// ListSources implements driver.SourceStore.
func (o *Ops[Q]) ListSources(ctx context.Context) ([]driver.SourceRow, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Sources.ListSources), o.c.SQL.Sources.ScanSource)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}
