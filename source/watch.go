package source

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelq/keel/driver"
)

// watch reads, every Check, whether the source's queue or type is paused
// and how large the type's backlog is, and writes the source's report.
func (s *Source) watch(ctx context.Context) {
	t := time.NewTicker(s.cfg.Check)
	defer t.Stop()
	for {
		if err := s.check(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("source: check", "err", err)
		}
		if err := s.report(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("source: report", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check sets blocked: StatePaused when the type, or its task queue (or a
// queue holding its pending tasks, without TaskQueue), is paused;
// StateBacklog when the type has more than MaxBacklog pending tasks.
// When the database cannot be read, the last finding stays.
func (s *Source) check(ctx context.Context) error {
	drv := s.c.Driver()
	// The tasks added before the read are committed, so the read counts
	// them and they leave sinceCheck with it; the ones added during the
	// read stay and may count twice, holding the source a little early,
	// never late.
	s.counted.Lock()
	since := s.sinceCheck
	s.counted.Unlock()
	settings, err := drv.ListSettings(ctx)
	if err != nil {
		return fmt.Errorf("read settings: %w", err)
	}
	counts, err := drv.Counts(ctx)
	if err != nil {
		return fmt.Errorf("read counts: %w", err)
	}
	var backlog int64
	queues := []string{}
	if s.cfg.TaskQueue != "" {
		queues = append(queues, s.cfg.TaskQueue)
	}
	for _, r := range counts {
		if r.Type != s.cfg.Type || (r.Kind != string(driver.StatePending) && r.Kind != driver.KindRetrying) {
			continue
		}
		if s.cfg.TaskQueue != "" && r.Queue != s.cfg.TaskQueue {
			continue
		}
		backlog += r.N
		if !slices.Contains(queues, r.Queue) {
			queues = append(queues, r.Queue)
		}
	}
	blocked := ""
	for _, st := range settings {
		if st.Paused && ((st.Kind == driver.SettingType && st.Name == s.cfg.Type) ||
			(st.Kind == driver.SettingQueue && slices.Contains(queues, st.Name))) {
			blocked = StatePaused
		}
	}
	s.counted.Lock()
	s.backlog = backlog
	s.sinceCheck -= since
	s.counted.Unlock()
	if blocked == "" && s.cfg.MaxBacklog >= 0 && backlog > s.cfg.MaxBacklog {
		blocked = StateBacklog
	}
	if prev := s.blocked.Swap(blocked).(string); prev != blocked {
		s.log.Info("source: consumption "+map[bool]string{true: "resumed", false: "held"}[blocked == ""],
			"reason", blocked, "backlog", backlog, "max_backlog", s.cfg.MaxBacklog)
	}
	return nil
}

// report writes the source's counters and state for this node.
func (s *Source) report(ctx context.Context) error {
	st := s.Stats()
	return s.store.ReportSource(ctx, driver.SourceReport{Source: s.cfg.Name, Node: s.cfg.Node, Kind: s.cfg.Kind, Type: s.cfg.Type,
		State: st.State, LastError: st.LastError, Accepted: st.Accepted, Duplicate: st.Duplicate, Rejected: st.Rejected,
		Nacked: st.Nacked, AckP50: st.AckP50, AckP99: st.AckP99, StartedAt: s.started, Now: s.cfg.Now()})
}

// ackWindow keeps the latest ack times for the reported percentiles.
type ackWindow struct {
	mu   sync.Mutex
	ring [1024]time.Duration
	n    int // how many were ever added
}

func (w *ackWindow) add(d time.Duration) {
	w.mu.Lock()
	w.ring[w.n%len(w.ring)] = d
	w.n++
	w.mu.Unlock()
}

func (w *ackWindow) quantiles() (p50, p99 time.Duration) {
	w.mu.Lock()
	xs := slices.Clone(w.ring[:min(w.n, len(w.ring))])
	w.mu.Unlock()
	if len(xs) == 0 {
		return 0, 0
	}
	slices.Sort(xs)
	return xs[(len(xs)-1)/2], xs[(len(xs)-1)*99/100]
}

// metrics are a source's Prometheus metrics, labelled with its name.
type metrics struct {
	messages *prometheus.CounterVec
	ack      prometheus.Histogram
}

func newMetrics(name string, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "keel_source_messages_total",
			Help:        "Broker messages a source handled, by result: accepted (a new task), duplicate (its task existed), rejected (stored in keel_rejected), nacked (handed back to the broker).",
			ConstLabels: prometheus.Labels{"source": name},
		}, []string{"result"}),
		ack: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "keel_source_ack_seconds",
			Help:        "Time from a broker message's arrival to its acknowledgement, after its task committed.",
			ConstLabels: prometheus.Labels{"source": name},
			Buckets:     []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	for _, r := range []string{"accepted", "duplicate", "rejected", "nacked"} {
		m.messages.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.messages, m.ack} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("source %q: register metrics: %w", name, err)
			}
		}
	}
	return m, nil
}
