package server

import (
	"context"
	_ "embed"
	"errors"
	"net/http"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/chaos/lastrun"
)

// readyTimeout bounds the database query of GET /readyz.
const readyTimeout = 2 * time.Second

// openapiJSON is the API's OpenAPI 3.1 document, written by hand.
//
//go:embed openapi.json
var openapiJSON []byte

// healthz handles GET /healthz: the process is alive.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
	return nil
}

// readyz handles GET /readyz: 200 when the database answers a cheap query
// (looking up a task id that never exists) within readyTimeout, else 503.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	_, err := s.c.Get(ctx, 0)
	if err != nil && !errors.Is(err, keel.ErrNotFound) {
		if r.Context().Err() == nil {
			s.log.Warn("keel server: readiness check failed", "error", err)
		}
		writeProblem(w, http.StatusServiceUnavailable, "the database did not answer within "+readyTimeout.String())
		return nil
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
	return nil
}

// openapi handles GET /v1/openapi.json.
func (s *server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(openapiJSON) //nolint:errcheck // the client went away
	return nil
}

// stats handles GET /v1/stats.
func (s *server) stats(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	st, err := s.c.Stats(r.Context())
	if err != nil {
		return err
	}
	out := Stats{
		At: st.At.UTC(), Counts: counts(st.Counts), Queues: make([]QueueStats, len(st.Queues)),
		DeadLastHour: st.DeadLastHour, Alert: st.Alert, Firing: st.Firing, Nodes: st.Nodes,
	}
	for i, q := range st.Queues {
		out.Queues[i] = queueStats(q)
	}
	out.Keel = KeelStats{Queue: queueStats(st.Keel.QueueStats), HitsLastHour: st.Keel.HitsLastHour,
		FailedLastHour: st.Keel.FailedLastHour, DeliveriesFailing: st.Keel.DeliveriesFailing, DeliveriesDead: st.Keel.DeliveriesDead}
	sources, err := s.c.Sources(r.Context())
	if err != nil {
		return err
	}
	out.Sources = sourceRecords(sources)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// queueStats is one queue of Stats.
func queueStats(q keel.QueueStats) QueueStats {
	qs := QueueStats{Name: q.Name, Counts: counts(q.Counts), Views: views(q.Views), Rates: Rates(q.Rates),
		PerSecond: q.PerSecond, OldestReadyAge: Duration(q.OldestReadyAge), TimeToDrain: Duration(q.TimeToDrain),
		DeadLastHour: q.DeadLastHour, Paused: q.Paused, Served: q.Served, Types: []TypeStats{}}
	for _, t := range q.Types {
		qs.Types = append(qs.Types, TypeStats{Name: t.Name, Views: views(t.Views), Counts: counts(t.Counts),
			Rates: Rates(t.Rates), OldestReadyAge: Duration(t.OldestReadyAge), MeanDuration: Duration(t.MeanDuration),
			TimeToDrain: Duration(t.TimeToDrain), DeadLastHour: t.DeadLastHour, FailedLastHour: t.FailedLastHour,
			AttemptsLastHour: t.AttemptsLastHour, Paused: t.Paused, Braked: t.Braked})
	}
	return qs
}

// nodes handles GET /v1/nodes.
func (s *server) nodes(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	ns, err := s.c.Nodes(r.Context())
	if err != nil {
		return err
	}
	list := NodeList{Nodes: make([]Node, len(ns))}
	for i, n := range ns {
		queues := n.Queues
		if queues == nil {
			queues = []string{}
		}
		workers := n.Workers
		if workers == nil {
			workers = map[string]int{}
		}
		list.Nodes[i] = Node{Name: n.Name, Host: n.Host, PID: n.PID, Queues: queues, StartedAt: n.StartedAt.UTC(),
			HeartbeatAt: n.HeartbeatAt.UTC(), Workers: workers, Version: n.Version, Running: n.Running, Lost: n.Lost}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// chaosReadTimeout bounds GET /v1/system's read of the last chaos run.
const chaosReadTimeout = 500 * time.Millisecond

// system handles GET /v1/system: this process's connection pool, read
// without touching the database, then the last keel chaos run. The run is
// read only when the pool has an idle connection (or reports none), within
// chaosReadTimeout, so that a full pool or a database down still gets the
// pool's figures at once and no caller waits behind this read.
func (s *server) system(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	var out System
	read := true
	if ps, ok := s.c.Driver().(driver.PoolStater); ok {
		p := ps.PoolStats()
		out.Pool = &Pool{InUse: p.InUse, Idle: p.Idle, Max: p.Max, WaitCount: p.WaitCount,
			WaitDuration: Duration(p.WaitDuration), MaxSetting: p.MaxSetting}
		read = p.Idle > 0
	}
	if read {
		ctx, cancel := context.WithTimeout(r.Context(), chaosReadTimeout)
		defer cancel()
		if rec, err := lastrun.Load(ctx, s.c.Driver()); err == nil && rec != nil {
			out.Chaos = &ChaosRun{At: rec.At.UTC(), Verdict: rec.Verdict, Database: rec.Database, Scenarios: rec.Scenarios,
				Failed: rec.Failed, Skipped: rec.Skipped, Version: rec.Version}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// views converts a view map for JSON, every view present.
func views(v map[keel.View]int64) map[string]int64 {
	out := map[string]int64{}
	for _, k := range []keel.View{keel.ViewReady, keel.ViewScheduled, keel.ViewRetrying, keel.ViewRunning, keel.ViewDead} {
		out[string(k)] = v[k]
	}
	return out
}
