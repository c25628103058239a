package dashboard

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/keelq/keel"
)

// overviewData is the overview page and its live fragment.
type overviewData struct {
	Stats      *keel.Stats
	Views      map[keel.View]int64 // every queue's
	Backlog    int64               // ready + scheduled + retrying
	Firing     []*keel.Alert       // the newest 20 firing
	FiringN    int                 // how many fire
	LastAlert  time.Time           // when the newest alert fired; zero: never
	NodesAlive int
	NodesLost  int
	// The last hour's history, summed.
	Hour  keel.HistoryPoint
	Range string // the charts' range: hour, day or week
	// Latency is pickup and run time over the newest finished tasks;
	// Attempts its attempts-used distribution as table rows.
	Latency     *keel.Latency
	Attempts    []attemptsRow
	SampleLimit int
}

// latencySample is how many of the newest finished tasks the overview's
// pickup, run time and attempts figures are computed from.
const latencySample = 1000

// attemptsRow is one state's tasks by attempts used (1, 2, 3, 4, 5+), as
// counts and shares of the row's total.
type attemptsRow struct {
	State  keel.State
	Total  int64
	Counts [keel.AttemptBuckets]int64
}

// attemptsRows turns l's distribution into rows, leaving out empty ones.
func attemptsRows(l *keel.Latency) []attemptsRow {
	var out []attemptsRow
	for _, r := range []attemptsRow{{State: keel.StateSucceeded, Counts: l.Succeeded}, {State: keel.StateDead, Counts: l.Dead}} {
		for _, n := range r.Counts {
			r.Total += n
		}
		if r.Total > 0 {
			out = append(out, r)
		}
	}
	return out
}

// overviewRead reads what the overview shows: counters, history, alerts
// and nodes, and of the task table only the newest finished tasks through
// the finish-time index (Client.Latency: at most latencySample rows).
func (d *dash) overviewRead(r *http.Request) (*overviewData, error) {
	ctx := r.Context()
	st, err := d.c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	o := &overviewData{Stats: st, Views: map[keel.View]int64{}, Range: chartRange(r.URL.Query().Get("range"))}
	for _, q := range st.Queues {
		for v, n := range q.Views {
			o.Views[v] += n
		}
	}
	o.Backlog = backlog(o.Views)
	for _, n := range st.Firing {
		o.FiringN += n
	}
	if st.Alert {
		if o.Firing, err = d.c.Alerts(ctx, keel.AlertFilter{Firing: true, Limit: 20}); err != nil {
			return nil, err
		}
	}
	last, err := d.c.Alerts(ctx, keel.AlertFilter{Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(last) > 0 {
		o.LastAlert = last[0].FiredAt
	}
	nodes, err := d.c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n.Lost {
			o.NodesLost++
		} else {
			o.NodesAlive++
		}
	}
	if o.Latency, err = d.c.Latency(ctx, keel.LatencyParams{Limit: latencySample}); err != nil {
		return nil, err
	}
	o.Attempts, o.SampleLimit = attemptsRows(o.Latency), latencySample
	hist, err := d.c.History(ctx, st.At.Add(-time.Hour), time.Minute)
	if err != nil {
		return nil, err
	}
	for _, p := range hist {
		o.Hour.Enqueued += p.Enqueued
		o.Hour.Hits += p.Hits
		o.Hour.Attempts += p.Attempts
		o.Hour.Ended += p.Ended
		o.Hour.Failed += p.Failed
		o.Hour.Succeeded += p.Succeeded
		o.Hour.Dead += p.Dead
	}
	return o, nil
}

// overview is GET /: the whole system at a glance, with charts.
func (d *dash) overview(w http.ResponseWriter, r *http.Request, v *viewer) error {
	o, err := d.overviewRead(r)
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, "overview", v, o)
}

// overviewLive is GET /live: the overview's figures alone, which the page
// polls every 3 seconds.
func (d *dash) overviewLive(w http.ResponseWriter, r *http.Request, v *viewer) error {
	o, err := d.overviewRead(r)
	if err != nil {
		return err
	}
	return d.render(w, r, http.StatusOK, "overview", v, o, "live")
}

// chartRange is a valid chart range, default hour.
func chartRange(s string) string {
	switch s {
	case "day", "week":
		return s
	}
	return "hour"
}

// ranges are the charts' spans and steps.
var ranges = map[string]struct{ span, step time.Duration }{
	"hour": {time.Hour, time.Minute},
	"day":  {24 * time.Hour, 15 * time.Minute},
	"week": {7 * 24 * time.Hour, time.Hour},
}

// chartData is GET /history.json: the overview's chart series, per minute.
type chartData struct {
	Range string `json:"range"`
	Step  int64  `json:"step"` // seconds
	// At is each step's start (Unix seconds).
	At []int64 `json:"at"`
	// Throughput: tasks finished (succeeded or dead) per minute; Failures:
	// failed attempts per minute; Enqueued: tasks added per minute.
	Throughput []float64 `json:"throughput"`
	Failures   []float64 `json:"failures"`
	Enqueued   []float64 `json:"enqueued"`
	// ErrorRate: failed attempts per ended attempt, in percent; null for
	// a step in which no attempt ended.
	ErrorRate []*float64 `json:"error_rate"`
	// Backlog: pending tasks at each step's end, estimated (see the page);
	// BacklogPeak: the most pending tasks the leader sampled in the step.
	// Both are null where nothing is known: before the history's first
	// minute, and for the peak in a step without a sample.
	Backlog     []*int64 `json:"backlog"`
	BacklogPeak []*int64 `json:"backlog_peak"`
}

func (d *dash) historyJSON(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	name := chartRange(r.URL.Query().Get("range"))
	rg := ranges[name]
	ctx := r.Context()
	counts, err := d.c.Counts(ctx)
	if err != nil {
		return err
	}
	hist, err := d.c.History(ctx, d.now().Add(-rg.span), rg.step)
	if err != nil {
		return err
	}
	perMin := rg.step.Minutes()
	c := chartData{Range: name, Step: int64(rg.step.Seconds())}
	for _, p := range hist {
		c.At = append(c.At, p.At.Unix())
		c.Throughput = append(c.Throughput, float64(p.Succeeded+p.Dead)/perMin)
		c.Failures = append(c.Failures, float64(p.Failed)/perMin)
		c.Enqueued = append(c.Enqueued, float64(p.Enqueued)/perMin)
		c.ErrorRate = append(c.ErrorRate, errorRate(p))
	}
	c.Backlog = backlogCurve(counts, hist)
	for _, p := range hist {
		var peak *int64
		if p.Sampled && !p.Unrecorded {
			peak = &p.PendingPeak
		}
		c.BacklogPeak = append(c.BacklogPeak, peak)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(c)
}

// errorRate is p's failed attempts per ended attempt in percent, or nil
// when none ended.
func errorRate(p keel.HistoryPoint) *float64 {
	if p.Ended == 0 {
		return nil
	}
	r := 100 * float64(p.Failed) / float64(p.Ended)
	return &r
}

// backlogCurve estimates the pending tasks at the end of each step by
// walking back from the live count: before a step there were as many as
// after it, less the tasks enqueued and the failed attempts sent back to
// retry in it, plus the attempts started in it. Cancelled pending tasks,
// snoozes and requeued dead letters are not in the history, so the curve
// is an approximation; it never goes below zero. A step before the
// history's first minute has none (nil): nothing is known of it.
func backlogCurve(counts map[string]map[keel.State]int64, hist []keel.HistoryPoint) []*int64 {
	var pending int64
	for _, q := range counts {
		pending += q[keel.StatePending]
	}
	out := make([]*int64, len(hist))
	for i := len(hist) - 1; i >= 0; i-- {
		p := hist[i]
		if p.Unrecorded {
			break
		}
		out[i] = new(max(pending, 0))
		retried := max(p.Failed-p.Dead, 0)
		pending = pending - p.Enqueued - retried + p.Attempts
	}
	return out
}
