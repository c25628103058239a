package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Alerts (keel_alerts, keel_alert_deliveries) and small stored documents
// (keel_meta). The leader opens and resolves alerts; notifier deliveries
// run as keel tasks and record each attempt here. Every write takes its
// time from the params (the leader's clock), on every database alike.

// The events of an alert that notifiers are told about.
const (
	AlertFired    = "fired"
	AlertResolved = "resolved"
)

// Limits of the alert columns, the same on every database.
const (
	MaxAlertRule     = 64
	MaxAlertSubject  = 300
	MaxAlertNotifier = 100
	MaxAlertText     = 4000 // message, hint, values, a delivery's last error
	MaxMetaName      = 100
	MaxMetaValue     = 64 << 10
)

// AlertRow is one row of keel_alerts: an alert that fired and, once its
// condition cleared, resolved. At most one alert of a rule and subject is
// open (firing) at a time.
type AlertRow struct {
	ID      int64
	Rule    string // dead_per_hour, oldest_ready_age, ...
	Subject string // what it is about: "type:email.send", "queue:default", "node:n1", "all"
	Message string // what fired, with the numbers when it fired
	Hint    string // what to run next
	Values  json.RawMessage
	FiredAt time.Time
	// CurrentMessage and CurrentValues are the numbers of the latest
	// evaluation while the alert fired (UpdateAlert), recorded at
	// CurrentAt; empty, nil and zero while they are those it fired with.
	CurrentMessage string
	CurrentValues  json.RawMessage
	CurrentAt      time.Time
	// ResolvedAt is zero while the alert fires.
	ResolvedAt      time.Time
	ResolvedMessage string
	ResolvedValues  json.RawMessage
	// Deliveries are the notifier deliveries recorded for this alert,
	// ordered by event (fired first) and notifier.
	Deliveries []DeliveryRow
}

// Open reports whether the alert still fires.
func (a *AlertRow) Open() bool { return a.ResolvedAt.IsZero() }

// DeliveryRow is one notifier's delivery of one event of an alert.
type DeliveryRow struct {
	AlertID  int64
	Event    string // AlertFired or AlertResolved
	Notifier string
	Attempts int
	// DeliveredAt is zero until an attempt succeeded.
	DeliveredAt time.Time
	LastError   string
	UpdatedAt   time.Time
}

// FireAlertParams opens an alert of Rule and Subject.
type FireAlertParams struct {
	Rule, Subject, Message, Hint string
	Values                       json.RawMessage // a JSON object, or nil
	Now                          time.Time
}

// UpdateAlertParams records the latest message and values of the open
// alert ID, as of Now.
type UpdateAlertParams struct {
	ID      int64
	Message string
	Values  json.RawMessage
	Now     time.Time
}

// ResolveAlertParams resolves the open alert ID.
type ResolveAlertParams struct {
	ID      int64
	Message string
	Values  json.RawMessage
	Now     time.Time
}

// AlertFilter selects alerts for ListAlerts, newest first.
type AlertFilter struct {
	Rule, Subject string // "" matches any
	// Open selects only alerts that still fire.
	Open bool
	// Since selects alerts fired at or after it; zero: any.
	Since time.Time
	// BeforeID pages: only alerts with a smaller id; 0: from the newest.
	BeforeID int64
	Limit    int // 1..1000
}

// DeliveryParams records one delivery attempt of an alert's event to a
// notifier: Attempts grows by one, DeliveredAt is set by the first attempt
// with Delivered (and kept after), LastError is Error ("" on success).
type DeliveryParams struct {
	AlertID         int64
	Event, Notifier string
	Delivered       bool
	Error           string
	Now             time.Time
}

// Validate rejects what no driver stores.
func (p FireAlertParams) Validate() error {
	return errors.Join(
		checkText("rule", p.Rule, MaxAlertRule, true),
		checkText("subject", p.Subject, MaxAlertSubject, true),
		checkText("message", p.Message, MaxAlertText, true),
		checkText("hint", p.Hint, MaxAlertText, false),
		checkValues(p.Values),
	)
}

// Validate rejects what no driver stores.
func (p ResolveAlertParams) Validate() error {
	if p.ID <= 0 {
		return fmt.Errorf("alert id must be positive, got %d", p.ID)
	}
	return errors.Join(checkText("message", p.Message, MaxAlertText, true), checkValues(p.Values))
}

// Validate rejects what no driver stores.
func (p UpdateAlertParams) Validate() error {
	if p.ID <= 0 {
		return fmt.Errorf("alert id must be positive, got %d", p.ID)
	}
	return errors.Join(checkText("message", p.Message, MaxAlertText, true), checkValues(p.Values))
}

// Validate rejects a filter no driver runs.
func (f AlertFilter) Validate() error {
	if f.Limit < 1 || f.Limit > 1000 {
		return fmt.Errorf("limit must be in 1..1000, got %d", f.Limit)
	}
	if f.BeforeID < 0 {
		return fmt.Errorf("before_id must not be negative, got %d", f.BeforeID)
	}
	return nil
}

// Validate rejects what no driver stores.
func (p DeliveryParams) Validate() error {
	if p.AlertID <= 0 {
		return fmt.Errorf("alert id must be positive, got %d", p.AlertID)
	}
	if p.Event != AlertFired && p.Event != AlertResolved {
		return fmt.Errorf("event must be %q or %q, got %q", AlertFired, AlertResolved, p.Event)
	}
	return errors.Join(checkText("notifier", p.Notifier, MaxAlertNotifier, true), checkText("error", p.Error, MaxAlertText, false))
}

// ValidateMeta rejects a stored document no driver keeps: an empty or long
// name, a value over MaxMetaValue bytes.
func ValidateMeta(name string, value []byte) error {
	if err := checkText("meta name", name, MaxMetaName, true); err != nil {
		return err
	}
	if len(value) > MaxMetaValue {
		return fmt.Errorf("meta %q: value of %d bytes is over %d", name, len(value), MaxMetaValue)
	}
	return nil
}

func checkText(what, s string, limit int, required bool) error {
	switch {
	case required && s == "":
		return fmt.Errorf("%s must not be empty", what)
	case len(s) > limit:
		return fmt.Errorf("%s is %d bytes, over the limit of %d", what, len(s), limit)
	case !utf8.ValidString(s):
		// PostgreSQL and MySQL refuse it, SQLite would store it: refuse
		// it everywhere alike.
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s contains the NUL character", what)
	}
	return nil
}

func checkValues(v json.RawMessage) error {
	if v == nil {
		return nil
	}
	if len(v) > MaxAlertText {
		return fmt.Errorf("values are %d bytes, over the limit of %d", len(v), MaxAlertText)
	}
	var obj map[string]any
	if err := json.Unmarshal(v, &obj); err != nil || obj == nil {
		return fmt.Errorf("values must be a JSON object, got %.40q", v)
	}
	return checkText("values", string(v), MaxAlertText, false)
}
