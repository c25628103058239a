package sqlutil

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// Alerts (keel_alerts, keel_alert_deliveries) and keel_meta: what the
// drivers share of reading their rows and building ListAlerts' query.

// AlertColumns are the columns ScanAlert reads, in its order.
const AlertColumns = `id, rule, subject, message, hint, vals, fired_at, resolved_at, resolved_message, resolved_vals, ` +
	`current_message, current_vals, current_at`

// DeliveryColumns are the columns ScanDelivery reads, in its order.
const DeliveryColumns = `alert_id, event, notifier, attempts, delivered_at, last_error, updated_at`

// OpenKey is the value of keel_alerts.open_key while an alert of rule and
// subject fires: unique, so the database keeps one open alert per rule and
// subject. The rule's length comes first ("13:dead_per_hourall"), so no
// two pairs share a key, whatever bytes they hold; it is at most
// MaxOpenKey bytes.
func OpenKey(rule, subject string) string { return strconv.Itoa(len(rule)) + ":" + rule + subject }

// MaxOpenKey is the longest OpenKey: two digits of length, ":", a rule and
// a subject at their limits.
const MaxOpenKey = 3 + driver.MaxAlertRule + driver.MaxAlertSubject

// AlertTime is t as the drivers store it: UTC, microseconds.
func AlertTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// ScanAlert reads one row selected with AlertColumns. T is how the
// database hands over a timestamp and N one that may be NULL; at and opt
// turn them into UTC times (opt gives the zero time for NULL). Empty or
// NULL values come back nil.
func ScanAlert[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.AlertRow, error) {
	var (
		a                         driver.AlertRow
		hint, resolvedMsg, curMsg sql.NullString
		vals, resolvedVal, curVal sql.NullString
		fired                     T
		resolved, cur             N
	)
	if err := scan(&a.ID, &a.Rule, &a.Subject, &a.Message, &hint, &vals, &fired, &resolved, &resolvedMsg, &resolvedVal,
		&curMsg, &curVal, &cur); err != nil {
		return nil, err
	}
	a.Hint, a.ResolvedMessage, a.CurrentMessage = hint.String, resolvedMsg.String, curMsg.String
	a.Values, a.ResolvedValues, a.CurrentValues = rawJSON(vals), rawJSON(resolvedVal), rawJSON(curVal)
	a.FiredAt, a.ResolvedAt, a.CurrentAt = at(fired), opt(resolved), opt(cur)
	return &a, nil
}

// ScanDelivery reads one row selected with DeliveryColumns.
func ScanDelivery[T, N any](scan Scan, at func(T) time.Time, opt func(N) time.Time) (*driver.DeliveryRow, error) {
	var (
		r         driver.DeliveryRow
		lastError sql.NullString
		updated   T
		delivered N
	)
	if err := scan(&r.AlertID, &r.Event, &r.Notifier, &r.Attempts, &delivered, &lastError, &updated); err != nil {
		return nil, err
	}
	r.LastError = lastError.String
	r.DeliveredAt, r.UpdatedAt = opt(delivered), at(updated)
	return &r, nil
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid || s.String == "" {
		return nil
	}
	return json.RawMessage(s.String)
}

// AlertListQuery appends ListAlerts' filter, order and limit to base (a
// SELECT of AlertColumns) and returns the query and its arguments. mark
// returns the dialect's placeholder for the nth argument (from 1); at turns
// a time into the argument the database compares with fired_at.
func AlertListQuery(base string, f driver.AlertFilter, mark func(n int) string, at func(time.Time) any) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+mark(len(args)))
	}
	if f.Rule != "" {
		add("rule = ", f.Rule)
	}
	if f.Subject != "" {
		add("subject = ", f.Subject)
	}
	if f.Open {
		where = append(where, "open_key IS NOT NULL")
	}
	if !f.Since.IsZero() {
		add("fired_at >= ", at(AlertTime(f.Since)))
	}
	if f.BeforeID > 0 {
		add("id < ", f.BeforeID)
	}
	q := base
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, f.Limit)
	return q + " ORDER BY id DESC LIMIT " + mark(len(args)), args
}

// AlertIDs returns the ids of alerts.
func AlertIDs(alerts []driver.AlertRow) []int64 {
	ids := make([]int64, len(alerts))
	for i, a := range alerts {
		ids[i] = a.ID
	}
	return ids
}

// AttachDeliveries hands each delivery to its alert, keeping their order.
func AttachDeliveries(alerts []driver.AlertRow, ds []driver.DeliveryRow) {
	index := make(map[int64]int, len(alerts))
	for i, a := range alerts {
		index[a.ID] = i
	}
	for _, d := range ds {
		if i, ok := index[d.AlertID]; ok {
			alerts[i].Deliveries = append(alerts[i].Deliveries, d)
		}
	}
}

// DeliveredAt is the delivered_at argument of an attempt: its time when it
// succeeded, else NULL (the stored one is kept either way).
func DeliveredAt(p driver.DeliveryParams, at func(time.Time) any) any {
	if !p.Delivered {
		return nil
	}
	return at(AlertTime(p.Now))
}

// MetaValue is a stored document as GetMeta returns it: an empty one is
// empty, not nil (nil means there is none).
func MetaValue(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// AlertSQL are a driver's alert and keel_meta statements, each taking its
// arguments in the order named: Get (id) and Open (open key) select
// AlertColumns, List is the SELECT AlertListQuery completes, Update
// (message, values, now, id), Resolve (now, message, values, id),
// RecordDelivery (alert id, event, notifier, delivered at, error, now; the
// alert id last with DeliveryIDLast), GetMeta (name), PutMeta (name,
// value, now) and DeleteMeta (name). Deliveries is the query, and its
// arguments, of the deliveries (DeliveryColumns) of the alerts ids, in
// order. ScanAlert and ScanDelivery read their rows.
type AlertSQL[Q any] struct {
	Get, Open, List, Update, Resolve, RecordDelivery, GetMeta, PutMeta, DeleteMeta string
	// Fire (rule, subject, open key, message, hint, values, now) inserts
	// an alert and selects it (AlertColumns), or nothing when an alert of
	// the rule and subject is open. With FireInsert the driver runs Fire
	// itself: it returns the new alert's id, or false when the open key is
	// taken. FireOnPool runs each statement of FireAlert on its own (Do)
	// instead of in one transaction.
	Fire           string
	FireInsert     func(ctx context.Context, q Q, args []any) (id int64, inserted bool, err error)
	FireOnPool     bool
	DeliveryIDLast bool
	Deliveries     func(ids []int64) (string, []any)
	ScanAlert      func(Scan) (*driver.AlertRow, error)
	ScanDelivery   func(Scan) (*driver.DeliveryRow, error)
}

// LoadAlerts reads the alerts query selects (AlertColumns) on c, and
// their deliveries.
func LoadAlerts[Q any](ctx context.Context, c Conn, s AlertSQL[Q], query string, args ...any) ([]driver.AlertRow, error) {
	as, err := Collect(c.Rows(ctx, query, args...), s.ScanAlert)
	if err != nil || len(as) == 0 {
		return as, err
	}
	dq, dargs := s.Deliveries(AlertIDs(as))
	ds, err := Collect(c.Rows(ctx, dq, dargs...), s.ScanDelivery)
	if err != nil {
		return nil, err
	}
	AttachDeliveries(as, ds)
	return as, nil
}

// readAlerts reads alerts with LoadAlerts in one read-only snapshot.
func (o *Ops[Q]) readAlerts(ctx context.Context, query string, args ...any) ([]driver.AlertRow, error) {
	var as []driver.AlertRow
	err := o.c.DB.Read(ctx, func(q Q) error {
		var err error
		as, err = LoadAlerts(ctx, o.c.DB.Conn(q), o.c.SQL.Alerts, query, args...)
		return err
	})
	return as, err
}

// UpdateAlert implements driver.Driver.
func (o *Ops[Q]) UpdateAlert(ctx context.Context, p driver.UpdateAlertParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("update alert: %w", err)
	}
	// Rows matched, on MySQL too (clientFoundRows).
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Alerts.Update, p.Message, NullBytes(p.Values), o.c.DB.Time(AlertTime(p.Now)), p.ID)
	if err != nil {
		return false, fmt.Errorf("update alert %d: %w", p.ID, err)
	}
	return n == 1, nil
}

// ResolveAlert implements driver.Driver: the update and the read back in
// one transaction.
func (o *Ops[Q]) ResolveAlert(ctx context.Context, p driver.ResolveAlertParams) (*driver.AlertRow, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("resolve alert: %w", err)
	}
	s, db := o.c.SQL.Alerts, o.c.DB
	var (
		as       []driver.AlertRow
		resolved bool
	)
	err := db.Write(ctx, func(q Q) error {
		c := db.Conn(q)
		n, err := c.Exec(ctx, s.Resolve, db.Time(AlertTime(p.Now)), p.Message, NullBytes(p.Values), p.ID)
		if err != nil {
			return err
		}
		resolved = n == 1
		as, err = LoadAlerts(ctx, c, s, s.Get, p.ID)
		return err
	})
	if err == nil && len(as) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("resolve alert %d: %w", p.ID, err)
	}
	return &as[0], resolved, nil
}

// GetAlert implements driver.Driver.
func (o *Ops[Q]) GetAlert(ctx context.Context, id int64) (*driver.AlertRow, error) {
	as, err := o.readAlerts(ctx, o.c.SQL.Alerts.Get, id)
	if err == nil && len(as) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get alert %d: %w", id, err)
	}
	return &as[0], nil
}

// ListAlerts implements driver.Driver.
func (o *Ops[Q]) ListAlerts(ctx context.Context, f driver.AlertFilter) ([]driver.AlertRow, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	query, args := AlertListQuery(o.c.SQL.Alerts.List, f, o.c.DB.Mark, o.c.DB.Time)
	as, err := o.readAlerts(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return as, nil
}

// RecordDelivery implements driver.Driver: one upsert, which inserts
// nothing for an unknown alert.
func (o *Ops[Q]) RecordDelivery(ctx context.Context, p driver.DeliveryParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	args := []any{p.Event, p.Notifier, DeliveredAt(p, o.c.DB.Time), p.Error, o.c.DB.Time(AlertTime(p.Now))}
	if o.c.SQL.Alerts.DeliveryIDLast {
		args = append(args, p.AlertID)
	} else {
		args = append([]any{p.AlertID}, args...)
	}
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Alerts.RecordDelivery, args...)
	if err == nil && n == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record delivery of alert %d %s to %s: %w", p.AlertID, p.Event, p.Notifier, err)
	}
	return nil
}

// GetMeta implements driver.Driver.
func (o *Ops[Q]) GetMeta(ctx context.Context, name string) ([]byte, error) {
	v, err := One(o.c.DB.pool().Rows(ctx, o.c.SQL.Alerts.GetMeta, name), func(scan Scan) (*[]byte, error) {
		var v []byte
		return &v, scan(&v)
	})
	if err != nil {
		return nil, fmt.Errorf("get meta %q: %w", name, err)
	}
	if v == nil {
		return nil, nil
	}
	return MetaValue(*v), nil
}

// PutMeta implements driver.Driver.
func (o *Ops[Q]) PutMeta(ctx context.Context, name string, value []byte, now time.Time) error {
	if err := driver.ValidateMeta(name, value); err != nil {
		return fmt.Errorf("put meta: %w", err)
	}
	var err error
	if value == nil {
		_, err = o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Alerts.DeleteMeta, name)
	} else {
		_, err = o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Alerts.PutMeta, name, value, o.c.DB.Time(AlertTime(now)))
	}
	if err != nil {
		return fmt.Errorf("put meta %q: %w", name, err)
	}
	return nil
}

// maxFireAttempts bounds FireAlert's insert-or-read loop: a read finds no
// open alert only when another leader resolved it between the two.
const maxFireAttempts = 8

// FireAlert implements driver.Driver: the insert does nothing (or fails)
// when the unique open_key holds an open alert already, which is then read
// back (see AlertSQL.Fire).
func (o *Ops[Q]) FireAlert(ctx context.Context, p driver.FireAlertParams) (*driver.AlertRow, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("fire alert: %w", err)
	}
	s, db := o.c.SQL.Alerts, o.c.DB
	key := OpenKey(p.Rule, p.Subject)
	args := []any{p.Rule, p.Subject, key, p.Message, p.Hint, NullBytes(p.Values), db.Time(AlertTime(p.Now))}
	var (
		a      *driver.AlertRow
		opened bool
	)
	run := db.Write
	if s.FireOnPool {
		run = db.Do
	}
	err := run(ctx, func(q Q) error {
		c := db.Conn(q)
		for range maxFireAttempts {
			var as []driver.AlertRow
			var err error
			if s.FireInsert == nil {
				as, err = LoadAlerts(ctx, c, s, s.Fire, args...)
			} else {
				var id int64
				var inserted bool
				if id, inserted, err = s.FireInsert(ctx, q, args); err == nil && inserted {
					as, err = LoadAlerts(ctx, c, s, s.Get, id)
				}
			}
			if err != nil {
				return err
			}
			opened = len(as) == 1
			if !opened {
				if as, err = LoadAlerts(ctx, c, s, s.Open, key); err != nil {
					return err
				}
			}
			if len(as) == 1 {
				a = &as[0]
				return nil
			}
		}
		return fmt.Errorf("its open alert was resolved %d times while firing", maxFireAttempts)
	})
	if err != nil {
		return nil, false, fmt.Errorf("fire alert %s %s: %w", p.Rule, p.Subject, err)
	}
	return a, opened, nil
}
