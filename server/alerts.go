package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
)

// AlertRecord is one alert in GET /v1/alerts.
type AlertRecord struct {
	ID              int64              `json:"id"`
	Rule            string             `json:"rule"`
	Subject         string             `json:"subject"`
	State           string             `json:"state"`   // firing or resolved
	Message         string             `json:"message"` // as it fired
	Hint            string             `json:"hint,omitempty"`
	Values          map[string]any     `json:"values,omitempty"` // as it fired
	FiredAt         time.Time          `json:"fired_at"`
	CurrentMessage  string             `json:"current_message"` // the latest evaluation's while it fired
	CurrentValues   map[string]any     `json:"current_values,omitempty"`
	CurrentAt       time.Time          `json:"current_at"`
	ResolvedAt      *time.Time         `json:"resolved_at,omitempty"`
	ResolvedMessage string             `json:"resolved_message,omitempty"`
	Deliveries      []AlertDeliveryRec `json:"deliveries"`
}

// AlertDeliveryRec is one notifier's delivery of one event of an alert.
type AlertDeliveryRec struct {
	Event       string     `json:"event"`
	Notifier    string     `json:"notifier"`
	Attempts    int        `json:"attempts"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

// AlertList is the body of GET /v1/alerts.
type AlertList struct {
	Alerts     []AlertRecord `json:"alerts"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// AlertRules is the body of GET and PATCH /v1/alerts/rules: the rules in
// force, and whether they were set at runtime ("runtime") or come from
// the configuration ("config").
type AlertRules struct {
	DeadPerHour        int      `json:"dead_per_hour"`
	OldestReadyAge     Duration `json:"oldest_ready_age"`
	FailureRatio       float64  `json:"failure_ratio"`
	FailureMinAttempts int      `json:"failure_min_attempts"`
	FailureWindow      Duration `json:"failure_window"`
	NoLiveWorker       bool     `json:"no_live_worker"`
	NodeLost           bool     `json:"node_lost"`
	Source             string   `json:"source"`
}

// AlertRulesPatch changes some rules at runtime (PATCH /v1/alerts/rules);
// absent fields keep their value in force.
type AlertRulesPatch struct {
	DeadPerHour        *int      `json:"dead_per_hour,omitempty"`
	OldestReadyAge     *Duration `json:"oldest_ready_age,omitempty"`
	FailureRatio       *float64  `json:"failure_ratio,omitempty"`
	FailureMinAttempts *int      `json:"failure_min_attempts,omitempty"`
	FailureWindow      *Duration `json:"failure_window,omitempty"`
	NoLiveWorker       *bool     `json:"no_live_worker,omitempty"`
	NodeLost           *bool     `json:"node_lost,omitempty"`
}

// DrillRequest is the body of POST /v1/drill.
type DrillRequest struct {
	Timeout *Duration `json:"timeout,omitempty"`
}

// DrillResult is the answer of POST /v1/drill.
type DrillResult struct {
	Passed     bool            `json:"passed"`
	Started    time.Time       `json:"started"`
	Tasks      int             `json:"tasks"`
	AlertID    int64           `json:"alert_id,omitempty"`
	FiredAfter *Duration       `json:"fired_after,omitempty"`
	Notifiers  []DrillNotifier `json:"notifiers"`
	Cleaned    bool            `json:"cleaned"`
}

// DrillNotifier is one notifier's part in a drill.
type DrillNotifier struct {
	Name      string    `json:"name"`
	Delivered bool      `json:"delivered"`
	Delay     *Duration `json:"delay,omitempty"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
}

const (
	defaultDrillTimeout = 2 * time.Minute
	maxDrillTimeout     = 10 * time.Minute
)

// listAlerts handles GET /v1/alerts.
func (s *server) listAlerts(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "rule", "subject", "state", "fired_after", "cursor", "limit")
	if err != nil {
		return err
	}
	f := keel.AlertFilter{Rule: q["rule"], Subject: q["subject"], Limit: defaultLimit}
	switch q["state"] {
	case "", "all":
	case "firing":
		f.Firing = true
	default:
		return badRequest("query parameter \"state\" must be firing or all, got %q", shorten.String(q["state"], 64))
	}
	if f.Since, err = queryTime(q, "fired_after"); err != nil {
		return err
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return badRequest("query parameter \"limit\" must be an integer in 1..%d, got %q", maxLimit, shorten.String(v, 64))
		}
		f.Limit = n
	}
	if v, ok := q["cursor"]; ok {
		if f.BeforeID, err = decodeCursor(v); err != nil {
			return err
		}
	}
	limit := f.Limit
	f.Limit = min(limit+1, maxLimit)
	as, err := s.c.Alerts(r.Context(), f)
	if err != nil {
		return err
	}
	list := AlertList{Alerts: []AlertRecord{}}
	for i, a := range as {
		if i == limit {
			list.NextCursor = encodeCursor(as[i-1].ID)
			break
		}
		list.Alerts = append(list.Alerts, alertRecord(a))
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// getAlert handles GET /v1/alerts/{id}.
func (s *server) getAlert(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return badRequest("alert id must be a positive integer, got %q", shorten.String(r.PathValue("id"), 64))
	}
	a, err := s.c.GetAlert(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, alertRecord(a))
	return nil
}

func alertRecord(a *keel.Alert) AlertRecord {
	rec := AlertRecord{ID: a.ID, Rule: a.Rule, Subject: a.Subject, State: "firing", Message: a.Message, Hint: a.Hint,
		Values: a.Values, FiredAt: a.FiredAt.UTC(), CurrentMessage: a.CurrentMessage, CurrentValues: a.CurrentValues,
		CurrentAt: a.CurrentAt.UTC(), ResolvedMessage: a.ResolvedMessage, Deliveries: []AlertDeliveryRec{}}
	if !a.Firing() {
		rec.State, rec.ResolvedAt = "resolved", optTime(a.ResolvedAt)
	}
	for _, d := range a.Deliveries {
		rec.Deliveries = append(rec.Deliveries, AlertDeliveryRec{Event: d.Event, Notifier: d.Notifier, Attempts: d.Attempts,
			DeliveredAt: optTime(d.DeliveredAt), LastError: d.LastError})
	}
	return rec
}

// alertRules handles GET /v1/alerts/rules.
func (s *server) alertRules(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	return s.writeRules(w, r)
}

func (s *server) writeRules(w http.ResponseWriter, r *http.Request) error {
	rules, runtime, err := s.c.AlertRules(r.Context())
	if err != nil {
		return err
	}
	out := AlertRules{DeadPerHour: rules.DeadPerHour, OldestReadyAge: Duration(rules.OldestReadyAge), FailureRatio: rules.FailureRatio,
		FailureMinAttempts: rules.FailureMinAttempts, FailureWindow: Duration(rules.FailureWindow),
		NoLiveWorker: rules.NoLiveWorker, NodeLost: rules.NodeLost, Source: "config"}
	if runtime {
		out.Source = "runtime"
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// patchAlertRules handles PATCH /v1/alerts/rules: the given fields
// change the rules in force, in every process, until DELETE.
func (s *server) patchAlertRules(w http.ResponseWriter, r *http.Request) error {
	var p AlertRulesPatch
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &p); err != nil {
		return err
	}
	rules, _, err := s.c.AlertRules(r.Context())
	if err != nil {
		return err
	}
	set(&rules.DeadPerHour, p.DeadPerHour)
	set(&rules.FailureRatio, p.FailureRatio)
	set(&rules.FailureMinAttempts, p.FailureMinAttempts)
	set(&rules.NoLiveWorker, p.NoLiveWorker)
	set(&rules.NodeLost, p.NodeLost)
	if p.OldestReadyAge != nil {
		rules.OldestReadyAge = time.Duration(*p.OldestReadyAge)
	}
	if p.FailureWindow != nil {
		rules.FailureWindow = time.Duration(*p.FailureWindow)
	}
	if err := s.c.SetAlertRules(r.Context(), rules); err != nil {
		return err
	}
	return s.writeRules(w, r)
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// resetAlertRules handles DELETE /v1/alerts/rules: the configured rules
// apply again.
func (s *server) resetAlertRules(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	if err := s.c.ResetAlertRules(r.Context()); err != nil {
		return err
	}
	return s.writeRules(w, r)
}

// drill handles POST /v1/drill: it runs keel.Client.Drill and answers
// when the drill passed or its timeout ran out (200 either way; the body
// says which).
func (s *server) drill(w http.ResponseWriter, r *http.Request) error {
	var req DrillRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
			return err
		}
	}
	timeout := defaultDrillTimeout
	if req.Timeout != nil {
		timeout = time.Duration(*req.Timeout)
		if timeout < time.Second || timeout > maxDrillTimeout {
			return badRequest("field \"timeout\" must be in 1s..%v, got %v", maxDrillTimeout, timeout)
		}
	}
	// The answer comes when the drill ends: past the server's write
	// timeout, which is meant for ordinary requests.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout + 30*time.Second)) //nolint:errcheck // best effort
	rep, err := s.c.Drill(r.Context(), timeout)
	if err != nil {
		return err
	}
	out := DrillResult{Passed: rep.Passed, Started: rep.Started.UTC(), Tasks: rep.Tasks, AlertID: rep.AlertID,
		Cleaned: rep.Cleaned, Notifiers: []DrillNotifier{}}
	if rep.AlertID != 0 {
		d := Duration(rep.FiredAfter)
		out.FiredAfter = &d
	}
	for _, n := range rep.Notifiers {
		dn := DrillNotifier{Name: n.Name, Delivered: n.Delivered, Attempts: n.Attempts, LastError: n.LastError}
		if n.Delivered {
			d := Duration(n.Delay)
			dn.Delay = &d
		}
		out.Notifiers = append(out.Notifiers, dn)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
