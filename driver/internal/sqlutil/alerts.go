package sqlutil

import (
	"database/sql"
	"encoding/json"
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
