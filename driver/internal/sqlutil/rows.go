// Package sqlutil holds what keel's SQL drivers share: the driver.Driver
// methods whose logic is the same on every database (Ops, which each
// driver embeds, built with NewOps from its OpsConfig), the skeletons of the hot-path
// methods, reading task, setting, node and count rows, the List filter,
// the bulk-operation arguments, the idempotency-key holder check, the
// insert savepoint and the migration loop. Each driver keeps its own SQL
// and hands in how its database runs it and represents a timestamp or a
// placeholder; the few statements SQLite and MySQL write alike are in
// question.go.
package sqlutil

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// Scan reads the current row's columns into dest, like (*sql.Rows).Scan.
type Scan = func(dest ...any) error

// Rows is a row loop: it runs its query and calls row once per result row,
// stopping at the first error.
type Rows func(row func(scan Scan) error) error

// Queryer is a database/sql handle: *sql.DB, *sql.Tx or *sql.Conn.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Query returns the row loop of query on a database/sql handle.
func Query(ctx context.Context, q Queryer, query string, args ...any) Rows {
	return func(row func(scan Scan) error) error {
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := row(rows.Scan); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// Collect reads every row of rows with scan.
func Collect[R any](rows Rows, scan func(Scan) (*R, error)) ([]R, error) {
	var out []R
	err := rows(func(s Scan) error {
		r, err := scan(s)
		if err != nil {
			return err
		}
		out = append(out, *r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanTask reads one row selected with the drivers' taskColumns. T is how
// the database hands over a timestamp and N a timestamp that may be NULL;
// at and opt turn them into UTC times (opt gives the zero time for NULL).
func ScanTask[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.TaskRow, error) {
	var (
		r                                      driver.TaskRow
		state                                  string
		idemKey, owner                         sql.NullString
		timeoutMS                              int64
		runAt, createdAt, updatedAt            T
		leaseExp, started, attempted, finished N
		errs, steps                            []byte
		batch                                  sql.NullInt64
		seq                                    sql.NullString
	)
	err := scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Payload, &state, &r.Attempt, &r.MaxAttempts,
		&r.Fence, &runAt, &timeoutMS, &idemKey, &r.PayloadDigest, &owner, &leaseExp, &createdAt, &started,
		&attempted, &finished, &updatedAt, &errs, &r.Result, &r.Meta, &r.Snoozes, &steps, &batch, &seq)
	if err != nil {
		return nil, err
	}
	r.State = driver.State(state)
	r.BatchID, r.Sequence = batch.Int64, seq.String
	r.Timeout = time.Duration(timeoutMS) * time.Millisecond
	r.IdemKey, r.LeaseOwner = idemKey.String, owner.String
	r.RunAt, r.CreatedAt, r.UpdatedAt = at(runAt), at(createdAt), at(updatedAt)
	r.LeaseExpiresAt, r.StartedAt = opt(leaseExp), opt(started)
	r.AttemptedAt, r.FinishedAt = opt(attempted), opt(finished)
	if len(errs) > 0 && string(errs) != "[]" {
		if err := json.Unmarshal(errs, &r.Errors); err != nil {
			return nil, fmt.Errorf("task %d: decode error history: %w", r.ID, err)
		}
	}
	if r.Steps, err = driver.DecodeSteps(steps); err != nil {
		return nil, fmt.Errorf("task %d: %w", r.ID, err)
	}
	return &r, nil
}

// ScanArchivedTask reads one row of keel_archive selected with the drivers'
// taskColumns followed by archived_at.
func ScanArchivedTask[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.TaskRow, error) {
	var archived T
	r, err := ScanTask(func(dest ...any) error { return scan(append(dest, &archived)...) }, at, opt)
	if err != nil {
		return nil, err
	}
	r.ArchivedAt = at(archived)
	return r, nil
}

// ScanSetting reads one row selected with the drivers' settingColumns; at
// turns the database's timestamp into a UTC time.
func ScanSetting[T any](scan Scan, at func(T) time.Time) (*driver.Setting, error) {
	var (
		r                    driver.Setting
		kind                 string
		timeout, base, maxMS int64
		updated              T
	)
	if err := scan(&kind, &r.Name, &r.Paused, &r.Concurrency, &timeout, &r.MaxAttempts, &base, &maxMS, &updated,
		&r.Rate, &r.Burst); err != nil {
		return nil, err
	}
	r.Kind = driver.SettingKind(kind)
	r.Timeout, r.BackoffBase, r.BackoffMax = driver.SettingDuration(timeout), driver.SettingDuration(base), driver.SettingDuration(maxMS)
	r.UpdatedAt = at(updated)
	return &r, nil
}

// ScanNode reads one row of name, host, pid, queues, started_at,
// heartbeat_at, workers (a JSON object). Q is how the database hands over
// the queue list and queues decodes it.
func ScanNode[T, Q any](scan Scan, at func(T) time.Time, queues func(Q) ([]string, error)) (*driver.NodeRow, error) {
	var (
		n              driver.NodeRow
		qs             Q
		started, heart T
		workers        string
	)
	if err := scan(&n.Name, &n.Host, &n.PID, &qs, &started, &heart, &workers, &n.Version, &n.Running); err != nil {
		return nil, err
	}
	var err error
	if n.Queues, err = queues(qs); err != nil {
		return nil, fmt.Errorf("node %s: decode queues: %w", n.Name, err)
	}
	if err := json.Unmarshal([]byte(workers), &n.Workers); err != nil {
		return nil, fmt.Errorf("node %s: decode workers: %w", n.Name, err)
	}
	n.StartedAt, n.HeartbeatAt = at(started), at(heart)
	return &n, nil
}

// JSONStrings renders names as a JSON array.
func JSONStrings(names []string) string {
	b, _ := json.Marshal(names) //nolint:errcheck // strings always encode
	return string(b)
}

// JSONQueues decodes a queue list stored as a JSON array.
func JSONQueues(b []byte) ([]string, error) {
	var qs []string
	err := json.Unmarshal(b, &qs)
	return qs, err
}

// ScanCount reads one row of queue, type, state, count.
func ScanCount(scan Scan) (*driver.QueueCount, error) {
	var c driver.QueueCount
	var state string
	if err := scan(&c.Queue, &c.Type, &state, &c.Count); err != nil {
		return nil, err
	}
	c.State = driver.State(state)
	return &c, nil
}

// ScanFinishedCount reads one row of queue, state, count.
func ScanFinishedCount(scan Scan) (*driver.QueueCount, error) {
	var c driver.QueueCount
	var state string
	if err := scan(&c.Queue, &state, &c.Count); err != nil {
		return nil, err
	}
	c.State = driver.State(state)
	return &c, nil
}

// UTC is the at function of databases that hand over time.Time.
func UTC(t time.Time) time.Time { return t.UTC() }

// NullString is s as a statement argument: NULL when empty.
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// NullBytes is b as a text argument: NULL when nil.
func NullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// NullTime is t as a statement argument: NULL when zero.
func NullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// ScanTypeDefaults reads one row selected with the drivers' typeColumns
// (name, queue, priority, max_attempts, timeout_ms, backoff_base_ms,
// backoff_max_ms, on_dead, on_dead_hook, brake_window, brake_threshold,
// brake_cooldown_ms, updated_at); at turns the database's timestamp into
// a UTC time.
func ScanTypeDefaults[T any](scan Scan, at func(T) time.Time) (*driver.TypeDefaults, error) {
	var (
		r                    driver.TypeDefaults
		queue                sql.NullString
		priority             sql.NullInt64
		timeout, base, maxMS int64
		onDead               sql.NullString
		cooldown             int64
		updated              T
	)
	if err := scan(&r.Name, &queue, &priority, &r.MaxAttempts, &timeout, &base, &maxMS, &onDead, &r.OnDeadHook,
		&r.Brake.Window, &r.Brake.Threshold, &cooldown, &updated); err != nil {
		return nil, err
	}
	r.Queue, r.OnDead, r.Brake.Cooldown = queue.String, onDead.String, driver.SettingDuration(cooldown)
	if priority.Valid {
		p := int(priority.Int64)
		r.Priority = &p
	}
	r.Timeout, r.BackoffBase, r.BackoffMax = driver.SettingDuration(timeout), driver.SettingDuration(base), driver.SettingDuration(maxMS)
	r.UpdatedAt = at(updated)
	return &r, nil
}

// TypeArgs are the arguments of one type's row, in the order of the
// drivers' typeColumns without updated_at: name, queue (NULL when not
// set), priority (NULL when not set), max_attempts, the durations in
// milliseconds (driver.SettingMillis), on_dead (NULL when not set),
// on_dead_hook and the brake's thresholds.
func TypeArgs(t driver.TypeDefaults) []any {
	var priority any
	if t.Priority != nil {
		priority = *t.Priority
	}
	return []any{t.Name, NullString(t.Queue), priority, t.MaxAttempts,
		*driver.SettingMillis(&t.Timeout), *driver.SettingMillis(&t.BackoffBase), *driver.SettingMillis(&t.BackoffMax),
		NullString(t.OnDead), t.OnDeadHook, t.Brake.Window, t.Brake.Threshold, *driver.SettingMillis(&t.Brake.Cooldown)}
}

// SortedTypes returns the types of p sorted by name: the order in which
// drivers write them, so that concurrent declarations lock rows in one
// order and do not deadlock.
func SortedTypes(p driver.DeclareTypesParams) []driver.TypeDefaults {
	out := slices.Clone(p.Types)
	slices.SortFunc(out, func(a, b driver.TypeDefaults) int { return strings.Compare(a.Name, b.Name) })
	return out
}
